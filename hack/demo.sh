#!/usr/bin/env bash
# The main job: start a real local control plane, install the CRDs, start catalogd (as its own
# ServiceAccount, with the RBAC of config/rbac/), apply config/samples/, wait until the
# ConfigMap catalog is served, and print the objects as `kubectl get` would, each catalog's
# conditions, and a query of the served content. Stops the control plane at the end, unless
# OLM_DEMO_KEEP=1 (then it prints the KUBECONFIG to use and leaves it running).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source hack/prereqs.sh
ensure_prereqs

cargo build --quiet -p olm-e2e --bin olm-demo -p catalogd --bin catalogd
dir=$PWD/target/demo/cluster
tools/testbin/cluster.sh stop "$dir" >/dev/null 2>&1 || true
if [ "${OLM_DEMO_KEEP:-0}" = 1 ]; then
  tools/testbin/cluster.sh start "$dir" --crds config/crd
else
  # The control plane lives as long as this script holds its stdin: however the script ends,
  # the pipe closes and the supervisor stops everything it started.
  coproc CLUSTER { exec tools/testbin/cluster.sh run "$dir" --crds config/crd; }
  ready=""
  while IFS= read -r line <&"${CLUSTER[0]}"; do
    if [ "$line" = ready ]; then ready=1; break; fi
  done
  [ -n "$ready" ] || { echo "demo: the control plane did not start; logs in $dir/logs" >&2; exit 1; }
  cluster_in=${CLUSTER[1]} cluster_pid=$CLUSTER_PID
  trap 'exec {cluster_in}>&-; wait "$cluster_pid" 2>/dev/null || true' EXIT
fi
source "$dir/env"
export KUBECONFIG OLM_E2E_KUBECONFIG=$KUBECONFIG
echo
target/debug/olm-demo config/samples
echo
if [ "${OLM_DEMO_KEEP:-0}" = 1 ]; then
  echo "The control plane keeps running (catalogd stopped with the demo): export KUBECONFIG=$KUBECONFIG"
  echo "Stop it with: tools/testbin/cluster.sh stop $dir"
fi
