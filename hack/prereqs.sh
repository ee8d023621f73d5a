# Sourced by hack/demo.sh and hack/test.sh: installs, idempotently, what they need on a fresh
# machine. Heavy builds (the control plane) are cached by version outside the work tree.
set -euo pipefail

prereq_log() { printf 'prereqs: %s\n' "$*" >&2; }

ensure_debian_packages() {
  local missing=()
  # setpriv: the control plane's components die with their supervisor (--pdeathsig).
  { command -v setsid >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1; } || missing+=(util-linux)
  command -v tail >/dev/null 2>&1 || missing+=(coreutils)
  # The e2e tests' OCI registry (image sources).
  command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
  # The e2e tests' git servers: git's http-backend, and OpenSSH's sshd for git over ssh.
  command -v git >/dev/null 2>&1 || missing+=(git)
  [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-server)
  [ -e /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
  # The e2e tests' Prometheus (scrapes the managers) and promtool (checks the chart's alerts).
  { command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; } || missing+=(prometheus)
  # The node of the local cluster: containerd and runc, the CNI bridge and host-local plugins
  # (which bring iptables), iproute2 for its veth, and gcc with a static libc for Kubernetes'
  # pause.c (its sandbox image).
  { command -v containerd >/dev/null 2>&1 && command -v containerd-shim-runc-v2 >/dev/null 2>&1; } || missing+=(containerd)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null 2>&1 || missing+=(iptables)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc)
  # The shell of the generator images the node's tests run (a static busybox).
  [ -x /usr/bin/busybox ] || missing+=(busybox-static)
  [ -e /usr/lib/x86_64-linux-gnu/libc.a ] || [ -e /usr/lib/aarch64-linux-gnu/libc.a ] || missing+=(libc6-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    prereq_log "installing Debian packages: ${missing[*]}"
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

ensure_toolchains() {
  command -v go >/dev/null 2>&1 || { prereq_log "Go 1.26 or newer is required to build the control plane"; exit 1; }
  command -v cargo >/dev/null 2>&1 || { prereq_log "Rust (cargo) is required"; exit 1; }
  local c
  for c in rustfmt clippy; do
    if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
      prereq_log "adding rustup component $c"
      rustup component add "$c"
    fi
  done
}

ensure_prereqs() {
  ensure_debian_packages
  ensure_toolchains
  # Builds the Kubernetes binaries, etcd, helm, kustomize, CoreDNS and pause, or finds them in the cache;
  # exports K8S_BIN, ETCD_BIN, HELM_BIN, KUSTOMIZE_BIN, COREDNS_BIN, PAUSE_BIN.
  local bins
  bins=$("$(dirname "${BASH_SOURCE[0]}")/../tools/testbin/build.sh" all)
  eval "$bins"
  export K8S_BIN ETCD_BIN HELM_BIN KUSTOMIZE_BIN COREDNS_BIN PAUSE_BIN
}
