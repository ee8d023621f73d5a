#!/usr/bin/env bash
# The main job: start a real local control plane, install the CRDs, apply config/samples/ and
# print the objects as `kubectl get` would. Stops the control plane at the end, unless
# OLM_DEMO_KEEP=1 (then it prints the KUBECONFIG to use and leaves it running).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source hack/prereqs.sh
ensure_prereqs

cargo build --quiet -p olm-e2e --bin olm-demo
dir=$PWD/target/demo/cluster
tools/testbin/cluster.sh stop "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
if [ "${OLM_DEMO_KEEP:-0}" = 1 ]; then
  tools/testbin/cluster.sh start "$dir" --crds config/crd
else
  tools/testbin/cluster.sh start "$dir" --crds config/crd --watch-pid $$
  trap 'tools/testbin/cluster.sh stop "$dir"' EXIT
fi
source "$dir/env"
export KUBECONFIG
echo
target/debug/olm-demo config/samples
echo
if [ "${OLM_DEMO_KEEP:-0}" = 1 ]; then
  echo "The control plane keeps running: export KUBECONFIG=$KUBECONFIG"
  echo "Stop it with: tools/testbin/cluster.sh stop $dir"
fi
