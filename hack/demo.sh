#!/usr/bin/env bash
# The main job: start a real local cluster (control plane and one node), push the managers'
# images (assembled from this build) to the node's registry, install olm-rs with helm
# (charts/olm) so that every manager runs as a Pod, and walk through the story step by step:
# an operator's catalog image served, its metadata queried, an Operator resolved to a
# BundleDeployment and installed, upgraded with its catalog, metrics, deletion, uninstall. Stops the control plane at the end, unless OLM_DEMO_KEEP=1 (then
# it prints the KUBECONFIG to use and leaves it running).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source hack/prereqs.sh
ensure_prereqs

# Every binary of these packages: `--bin olm-demo` would limit the build to that one binary in
# each selected package, leaving the managers unbuilt on a fresh clone.
cargo build --quiet --locked --bins -p olm-e2e -p olm-cluster -p catalogd -p operator-controller -p catalog-switcher -p provisioner
dir=$PWD/target/demo/cluster
# The control plane's supervisor (the olm-cluster crate, cluster/), built above.
cluster=target/debug/olm-cluster
"$cluster" stop "$dir" >/dev/null 2>&1 || true
if [ "${OLM_DEMO_KEEP:-0}" = 1 ]; then
  "$cluster" start "$dir" --crds config/crd
else
  # The control plane lives as long as this script holds its stdin: however the script ends,
  # the pipe closes and the supervisor stops everything it started.
  coproc CLUSTER { exec "$cluster" run "$dir" --crds config/crd; }
  ready=""
  while IFS= read -r line <&"${CLUSTER[0]}"; do
    if [ "$line" = ready ]; then ready=1; break; fi
  done
  [ -n "$ready" ] || { echo "demo: the control plane did not start; logs in $dir/logs" >&2; exit 1; }
  cluster_in=${CLUSTER[1]} cluster_pid=$CLUSTER_PID
  trap 'exec {cluster_in}>&-; wait "$cluster_pid" 2>/dev/null || true' EXIT
fi
source "$dir/env"
export KUBECONFIG OLM_E2E_KUBECONFIG=$KUBECONFIG OLM_E2E_NODE_REGISTRY OLM_E2E_NODE_REGISTRY_DIR
echo "The \$ kubectl lines below are the commands to type by hand; kubectl v${K8S_BIN##*-v} was built with the"
echo "control plane: $K8S_BIN/kubectl"
echo
HELM_BIN=$HELM_BIN target/debug/olm-demo config/samples
echo
if [ "${OLM_DEMO_KEEP:-0}" = 1 ]; then
  echo "The cluster keeps running (olm-rs was uninstalled at the end of the demo): export KUBECONFIG=$KUBECONFIG"
  echo "kubectl for it: export PATH=$K8S_BIN:\$PATH"
  echo "Stop it with: $cluster stop $dir"
fi
