#!/usr/bin/env bash
# A real local Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler as plain processes on 127.0.0.1, on free ports, with a throw-away PKI.
#
#   cluster.sh start DIR [--crds CRD_DIR] [--watch-pid PID]
#       Builds or reuses the cached binaries, starts everything, writes DIR/kubeconfig and
#       DIR/env (shell assignments: KUBECONFIG, OLM_E2E_API_URL, ...). CRDs in CRD_DIR are
#       applied before the controller manager starts, so its garbage collector knows their kinds
#       from the first discovery (it re-reads discovery only every 30 s). With --watch-pid, the
#       cluster stops by itself when process PID exits.
#   cluster.sh stop DIR
#       Stops exactly the processes recorded in DIR/pids, in reverse start order (SIGTERM, then
#       SIGKILL after 10 s), and keeps DIR/logs for debugging.
#
# Logs of every component are in DIR/logs/.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_until DESCRIPTION SECONDS COMMAND...: polls COMMAND until it succeeds or the deadline passes.
wait_until() {
  local what=$1 deadline=$((SECONDS + $2)); shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then return 1; fi
    # A dead process will never become ready: fail fast with its log.
    for pidfile in "$dir"/pids/*; do
      [ -e "$pidfile" ] || continue
      if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        local name; name=$(basename "$pidfile" | sed 's/^[0-9]*-//')
        log "$name exited while waiting for $what; last lines of $dir/logs/$name.log:"
        tail -n 30 "$dir/logs/$name.log" >&2 || true
        return 1
      fi
    done
    sleep 0.2
  done
}

start_proc() { # start_proc ORDER NAME BINARY ARGS...
  local order=$1 name=$2; shift 2
  "$@" >"$dir/logs/$name.log" 2>&1 &
  echo $! >"$dir/pids/$order-$name"
}

make_pki() {
  local p=$dir/pki; mkdir -p "$p"
  (
    cd "$p"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj "/CN=olm-rs-test-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=serverAuth' \
      'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local' >server.ext
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=clientAuth' >client.ext
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver"
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -sha256 \
      -extfile server.ext -out apiserver.crt
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=olm-rs-admin"
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -sha256 \
      -extfile client.ext -out admin.crt
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key
    openssl pkey -in sa.key -pubout -out sa.pub
  ) >"$dir/logs/pki.log" 2>&1 || { cat "$dir/logs/pki.log" >&2; die "PKI generation failed"; }
}

write_kubeconfig() {
  local p=$dir/pki
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: olm-rs-test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 "$p/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $(base64 -w0 "$p/admin.crt")
    client-key-data: $(base64 -w0 "$p/admin.key")
contexts:
- name: olm-rs-test
  context: {cluster: olm-rs-test, user: admin}
current-context: olm-rs-test
EOF
}

api() { # api METHOD PATH [curl args...]: a request to the API server as the admin
  local method=$1 path=$2; shift 2
  curl -sS --fail-with-body --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    -X "$method" "https://127.0.0.1:$api_port$path" "$@"
}

apply_crds() {
  local f name
  for f in "$1"/*.yaml; do
    [ -e "$f" ] || continue
    name=$(sed -n 's/^  name: //p' "$f" | head -n1)
    api PATCH "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name?fieldManager=olm-rs-e2e&force=true" \
      -H 'Content-Type: application/apply-patch+yaml' --data-binary "@$f" >"$dir/logs/crd-$name.json" ||
      { cat "$dir/logs/crd-$name.json" >&2; die "applying CRD $f failed"; }
    wait_until "CRD $name to be established" 30 \
      sh -c "curl -sS --cacert '$dir/pki/ca.crt' --cert '$dir/pki/admin.crt' --key '$dir/pki/admin.key' \
        https://127.0.0.1:$api_port/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name |
        tr -d ' \n' | grep -q '\"type\":\"Established\",\"status\":\"True\"'" ||
      die "CRD $name was not established within 30 s"
    log "CRD $name established"
  done
}

cmd_start() {
  local crds="" watch_pid=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --crds) crds=$2; shift 2 ;;
      --watch-pid) watch_pid=$2; shift 2 ;;
      *) die "unknown argument $1" ;;
    esac
  done
  command -v openssl >/dev/null || die "openssl is required (apt-get install openssl)"
  command -v curl >/dev/null || die "curl is required (apt-get install curl)"

  local bins; bins=$("$here/build.sh" all)
  eval "$bins"
  mkdir -p "$dir/logs" "$dir/pids"
  rm -f "$dir"/pids/*
  local start=$SECONDS
  make_pki

  local etcd_port etcd_peer
  etcd_port=$(free_port); etcd_peer=$(free_port); api_port=$(free_port)
  local kcm_port sched_port; kcm_port=$(free_port); sched_port=$(free_port)

  start_proc 1 etcd "$ETCD_BIN/etcd" --name=olm-rs --data-dir="$dir/etcd" --unsafe-no-fsync \
    --log-level=warn --listen-client-urls="http://127.0.0.1:$etcd_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$etcd_peer" \
    --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
    --initial-cluster="olm-rs=http://127.0.0.1:$etcd_peer" --listen-metrics-urls=""
  wait_until "etcd" 30 curl -sf "http://127.0.0.1:$etcd_port/health" || die "etcd did not become healthy"

  local p=$dir/pki
  start_proc 2 kube-apiserver "$K8S_BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --secure-port="$api_port" --advertise-address=127.0.0.1 \
    --endpoint-reconciler-type=none \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --authorization-mode=RBAC --allow-privileged=true \
    --cert-dir="$dir/apiserver-certs" --kubelet-preferred-address-types=Hostname,InternalIP --v=1
  write_kubeconfig
  wait_until "kube-apiserver /readyz" 90 api GET /readyz || die "kube-apiserver did not become ready"
  log "kube-apiserver ready on https://127.0.0.1:$api_port after $((SECONDS - start))s"

  if [ -n "$crds" ]; then apply_crds "$crds"; fi

  start_proc 3 kube-controller-manager "$K8S_BIN/kube-controller-manager" --kubeconfig="$dir/kubeconfig" \
    --leader-elect=false \
    --controllers=garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller,serviceaccount-controller \
    --bind-address=127.0.0.1 --secure-port="$kcm_port" \
    --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics --v=1
  start_proc 4 kube-scheduler "$K8S_BIN/kube-scheduler" --kubeconfig="$dir/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="$sched_port" \
    --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics --v=1
  wait_until "kube-controller-manager" 60 curl -sfk "https://127.0.0.1:$kcm_port/healthz" ||
    die "kube-controller-manager did not become healthy"
  wait_until "kube-scheduler" 60 curl -sfk "https://127.0.0.1:$sched_port/healthz" ||
    die "kube-scheduler did not become healthy"
  # The serviceaccount controller creating `default` shows the controllers really run.
  wait_until "serviceaccount default/default" 60 api GET /api/v1/namespaces/default/serviceaccounts/default ||
    die "the serviceaccount controller did not create default/default"

  local version
  version=$(api GET /version | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')
  cat >"$dir/env" <<EOF
KUBECONFIG=$dir/kubeconfig
OLM_E2E_API_URL=https://127.0.0.1:$api_port
OLM_E2E_API_VERSION=$version
OLM_E2E_CLUSTER_DIR=$dir
OLM_E2E_HELM=$HELM_BIN/helm
EOF
  log "control plane $version up in $((SECONDS - start))s; kubeconfig: $dir/kubeconfig"

  if [ -n "$watch_pid" ]; then
    # Detached, so it outlives this script; `tail --pid` returns when PID exits.
    setsid bash -c "tail --pid='$watch_pid' -f /dev/null; '$here/cluster.sh' stop '$dir'" \
      >"$dir/logs/watcher.log" 2>&1 </dev/null &
  fi
}

cmd_stop() {
  [ -d "$dir/pids" ] || { log "nothing to stop in $dir"; return 0; }
  local pidfile pid name i
  for pidfile in $(ls -r "$dir"/pids/* 2>/dev/null); do
    pid=$(cat "$pidfile"); name=$(basename "$pidfile" | sed 's/^[0-9]*-//')
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      if kill -0 "$pid" 2>/dev/null; then
        log "$name ($pid) ignored SIGTERM for 10 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
      fi
    fi
    rm -f "$pidfile"
  done
  rm -rf "$dir/etcd" "$dir/apiserver-certs"
  log "stopped; logs kept in $dir/logs"
}

[ $# -ge 2 ] || die "usage: cluster.sh start DIR [--crds CRD_DIR] [--watch-pid PID] | cluster.sh stop DIR"
action=$1; dir=$(mkdir -p "$2" && cd "$2" && pwd); shift 2
case "$action" in
  start) cmd_start "$@" ;;
  stop) cmd_stop ;;
  *) die "unknown action $action" ;;
esac
