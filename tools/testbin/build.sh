#!/usr/bin/env bash
# Builds the real Kubernetes control plane binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler), etcd and helm from the Go module proxy, and caches them by version outside the
# work tree. Idempotent: a binary whose `--version` already prints the pinned version is kept.
#
# Every version is pinned by the committed wrapper modules beside this script (k8s/, etcd/, helm/):
# their go.mod/go.sum fix every transitive module, so two machines build the same thing.
#
# Prints the cache directory of each component as shell assignments on stdout, e.g.
#   K8S_BIN=/root/.cache/olm-rs/testbin/k8s-v1.36.3
# so callers can `eval "$(tools/testbin/build.sh)"`. Progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.sh
source "$here/versions.sh"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
cache=${OLM_TESTBIN_CACHE:-$HOME/.cache/olm-rs/testbin}
mkdir -p "$cache"

log() { printf 'testbin: %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1; then
  log "Go is required to build the control plane (Go 1.26 or newer)"; exit 1
fi

k8s_out=$cache/k8s-v$K8S_VERSION
etcd_out=$cache/etcd-v$ETCD_VERSION
helm_out=$cache/helm-v$HELM_VERSION

build_k8s() {
  if "$k8s_out/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes v$K8S_VERSION" &&
     [ -x "$k8s_out/kube-controller-manager" ] && [ -x "$k8s_out/kube-scheduler" ]; then
    log "kubernetes v$K8S_VERSION cached in $k8s_out"; return; fi
  local minor ldf p start=$SECONDS
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  ldf="-s -w"
  # Without these, /version reports v0.0.0-master, which breaks helm's kubeVersion checks and
  # the catalog-switcher's {kube_minor_version} template variable.
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf+=" -X $p.gitTreeState=clean -X $p.gitCommit=v$K8S_VERSION"
    ldf+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "building kubernetes v$K8S_VERSION (cold: about 5 minutes on 2 cores)"
  mkdir -p "$k8s_out.tmp"
  # One `go build` for all three: they share most packages.
  (cd "$here/k8s" && go build -trimpath -ldflags "$ldf" -o "$k8s_out.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler)
  rm -rf "$k8s_out" && mv "$k8s_out.tmp" "$k8s_out"
  log "built kubernetes v$K8S_VERSION in $((SECONDS - start))s"
}

build_etcd() {
  if "$etcd_out/etcd" --version 2>/dev/null | grep -q "etcd Version: $ETCD_VERSION"; then
    log "etcd v$ETCD_VERSION cached in $etcd_out"; return; fi
  local start=$SECONDS
  log "building etcd v$ETCD_VERSION"
  mkdir -p "$etcd_out"
  # The module root is package main; its default binary name would be "server".
  (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$etcd_out/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$etcd_out/etcd.tmp" "$etcd_out/etcd"
  log "built etcd v$ETCD_VERSION in $((SECONDS - start))s"
}

build_helm() {
  if "$helm_out/helm" version --short 2>/dev/null | grep -q "^v$HELM_VERSION"; then
    log "helm v$HELM_VERSION cached in $helm_out"; return; fi
  local start=$SECONDS minor
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  log "building helm v$HELM_VERSION"
  mkdir -p "$helm_out"
  (cd "$here/helm" && go build -trimpath -o "$helm_out/helm.tmp" -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor" helm.sh/helm/v3/cmd/helm)
  mv "$helm_out/helm.tmp" "$helm_out/helm"
  log "built helm v$HELM_VERSION in $((SECONDS - start))s"
}

only=${1:-all}
case "$only" in
  all) build_etcd; build_k8s; build_helm ;;
  k8s) build_k8s ;;
  etcd) build_etcd ;;
  helm) build_helm ;;
  *) log "usage: build.sh [all|k8s|etcd|helm]"; exit 2 ;;
esac

printf 'K8S_BIN=%q\nETCD_BIN=%q\nHELM_BIN=%q\n' "$k8s_out" "$etcd_out" "$helm_out"
