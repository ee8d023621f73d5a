#!/usr/bin/env bash
# Builds the real Kubernetes binaries (kube-apiserver, kube-controller-manager, kube-scheduler,
# and for a node and by hand kubelet, kube-proxy and kubectl), etcd, helm, kustomize (what the
# provisioner runs for kustomize bundles) and CoreDNS (the
# node's cluster DNS) from the Go module proxy, and Kubernetes' own pause.c (the node's sandbox
# image) with gcc, and caches them by version outside the work tree. Idempotent: a binary whose `--version`
# already prints the pinned version is kept. Each build prints a line when it starts, one a
# minute while it runs (how long so far) and one when it ends; Go's own output goes to a log
# file per component, named in those lines, and its last lines are printed if it fails.
#
# Every version is pinned by the committed wrapper modules beside this script (k8s/, etcd/, helm/,
# kustomize/,
# coredns/):
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

logs=$cache/logs
mkdir -p "$logs"

# built WHAT ABOUT LOG COMMAND...: runs COMMAND with its output in LOG, telling how long it has
# run (ABOUT is said once, at the start).
built() {
  local what=$1 about=$2 out=$3 start=$SECONDS pid next=60; shift 3
  log "building $what$about (details: $out)"
  "$@" >"$out" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - start)) -ge "$next" ]; then
      log "building $what: $(((SECONDS - start) / 60))m so far (details: $out)"
      next=$((next + 60))
    fi
  done
  if ! wait "$pid"; then
    log "building $what failed after $((SECONDS - start))s; the end of $out:"
    tail -n 30 "$out" >&2
    exit 1
  fi
  log "built $what in $((SECONDS - start))s"
}

if ! command -v go >/dev/null 2>&1; then
  log "Go is required to build the control plane (Go 1.26 or newer)"; exit 1
fi

k8s_out=$cache/k8s-v$K8S_VERSION
# The control plane, the node's kubelet and kube-proxy, and kubectl for a person at the demo.
k8s_tools="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"
etcd_out=$cache/etcd-v$ETCD_VERSION
helm_out=$cache/helm-v$HELM_VERSION
kustomize_out=$cache/kustomize-v$KUSTOMIZE_VERSION
coredns_out=$cache/coredns-v$COREDNS_VERSION
# pause.c comes with the Kubernetes module, so its build is cached by that version.
pause_out=$cache/pause-k8s-v$K8S_VERSION

build_k8s() {
  local b cached=1
  "$k8s_out/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes v$K8S_VERSION" || cached=""
  for b in $k8s_tools; do [ -x "$k8s_out/$b" ] || cached=""; done
  if [ -n "$cached" ]; then
    log "kubernetes v$K8S_VERSION cached in $k8s_out ($k8s_tools)"; return; fi
  local minor ldf p pkgs=()
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  ldf="-s -w"
  # Without these, /version reports v0.0.0-master, which breaks helm's kubeVersion checks and
  # the catalog-switcher's {kube_minor_version} template variable.
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf+=" -X $p.gitTreeState=clean -X $p.gitCommit=v$K8S_VERSION"
    ldf+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  for b in $k8s_tools; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  mkdir -p "$k8s_out.tmp"
  # One `go build` for all: they share most packages.
  built "kubernetes v$K8S_VERSION" " ($k8s_tools; cold: about 6 minutes on 2 cores)" \
    "$logs/k8s-v$K8S_VERSION.log" \
    bash -c 'cd "$1" && shift && go build -trimpath -ldflags "$1" -o "$2/" "${@:3}"' _ \
    "$here/k8s" "$ldf" "$k8s_out.tmp" "${pkgs[@]}"
  rm -rf "$k8s_out" && mv "$k8s_out.tmp" "$k8s_out"
}

build_etcd() {
  if "$etcd_out/etcd" --version 2>/dev/null | grep -q "etcd Version: $ETCD_VERSION"; then
    log "etcd v$ETCD_VERSION cached in $etcd_out"; return; fi
  mkdir -p "$etcd_out"
  # The module root is package main; its default binary name would be "server".
  built "etcd v$ETCD_VERSION" "" "$logs/etcd-v$ETCD_VERSION.log" \
    bash -c 'cd "$1" && go build -trimpath -ldflags "-s -w" -o "$2" go.etcd.io/etcd/server/v3' _ \
    "$here/etcd" "$etcd_out/etcd.tmp"
  mv "$etcd_out/etcd.tmp" "$etcd_out/etcd"
}

build_helm() {
  if "$helm_out/helm" version --short 2>/dev/null | grep -q "^v$HELM_VERSION"; then
    log "helm v$HELM_VERSION cached in $helm_out"; return; fi
  local minor
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  mkdir -p "$helm_out"
  built "helm v$HELM_VERSION" "" "$logs/helm-v$HELM_VERSION.log" \
    bash -c 'cd "$1" && go build -trimpath -o "$2" -ldflags "$3" helm.sh/helm/v3/cmd/helm' _ \
    "$here/helm" "$helm_out/helm.tmp" "-s -w \
    -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
  mv "$helm_out/helm.tmp" "$helm_out/helm"
}

# kustomize: what the provisioner runs for kustomize bundles (the image ships the same build).
build_kustomize() {
  if "$kustomize_out/kustomize" version 2>/dev/null | grep -qx "v$KUSTOMIZE_VERSION"; then
    log "kustomize v$KUSTOMIZE_VERSION cached in $kustomize_out"; return; fi
  mkdir -p "$kustomize_out"
  built "kustomize v$KUSTOMIZE_VERSION" "" "$logs/kustomize-v$KUSTOMIZE_VERSION.log" \
    bash -c 'cd "$1" && CGO_ENABLED=0 go build -trimpath -o "$2" -ldflags "$3" sigs.k8s.io/kustomize/kustomize/v5' _ \
    "$here/kustomize" "$kustomize_out/kustomize.tmp" \
    "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=v$KUSTOMIZE_VERSION"
  mv "$kustomize_out/kustomize.tmp" "$kustomize_out/kustomize"
}

build_coredns() {
  if "$coredns_out/coredns" -version 2>/dev/null | grep -q "^CoreDNS-$COREDNS_VERSION$"; then
    log "coredns v$COREDNS_VERSION cached in $coredns_out"; return; fi
  mkdir -p "$coredns_out"
  # The module root is package main (and the binary reports its version without ldflags).
  built "coredns v$COREDNS_VERSION" " (cold: about 3 minutes on 2 cores)" \
    "$logs/coredns-v$COREDNS_VERSION.log" \
    bash -c 'cd "$1" && go build -trimpath -ldflags "-s -w" -o "$2" github.com/coredns/coredns' _ \
    "$here/coredns" "$coredns_out/coredns.tmp"
  mv "$coredns_out/coredns.tmp" "$coredns_out/coredns"
}

# Kubernetes' pause (build/pause/linux/pause.c in the module), static, as its Makefile builds it:
# the node's sandbox image, and the init process that reaps the node's own namespaces.
build_pause() {
  local version=3.10.2-k8s-v$K8S_VERSION src
  if "$pause_out/pause" -v 2>/dev/null | grep -qx "pause.c v$version"; then
    log "pause ($version) cached in $pause_out"; return; fi
  command -v gcc >/dev/null 2>&1 || { log "gcc is required to build pause (Debian: gcc, libc6-dev)"; exit 1; }
  src=$(cd "$here/k8s" && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -f "$src/build/pause/linux/pause.c" ] || { log "pause.c not found in the Kubernetes module ($src)"; exit 1; }
  mkdir -p "$pause_out"
  built "pause ($version)" "" "$logs/pause-k8s-v$K8S_VERSION.log" \
    gcc -Os -Wall -Werror -static "-DVERSION=v$version" -o "$pause_out/pause.tmp" "$src/build/pause/linux/pause.c"
  mv "$pause_out/pause.tmp" "$pause_out/pause"
}

only=${1:-all}
case "$only" in
  all) build_etcd; build_k8s; build_helm; build_kustomize; build_coredns; build_pause ;;
  k8s) build_k8s ;;
  etcd) build_etcd ;;
  helm) build_helm ;;
  kustomize) build_kustomize ;;
  coredns) build_coredns ;;
  pause) build_pause ;;
  *) log "usage: build.sh [all|k8s|etcd|helm|kustomize|coredns|pause]"; exit 2 ;;
esac

printf 'K8S_BIN=%q\nETCD_BIN=%q\nHELM_BIN=%q\nKUSTOMIZE_BIN=%q\nCOREDNS_BIN=%q\nPAUSE_BIN=%q\n' \
  "$k8s_out" "$etcd_out" "$helm_out" "$kustomize_out" "$coredns_out" "$pause_out"
