# Convenience targets; the README's commands (hack/demo.sh, hack/test.sh) need no `just`.

# The demo: a local control plane with the samples applied.
demo:
    ./hack/demo.sh

# Every test, as CI runs it.
test:
    ./hack/test.sh

# Regenerate the CRD YAML from the Rust types.
crds:
    cargo run -q -p olm-api --bin crdgen

# Build (or find) the control plane binaries.
testbin:
    tools/testbin/build.sh all

# Start a control plane in DIR for manual work; KUBECONFIG=DIR/kubeconfig.
cluster-start dir="/tmp/olm":
    tools/testbin/cluster.sh start {{dir}} --crds config/crd

# Stop the control plane in DIR.
cluster-stop dir="/tmp/olm":
    tools/testbin/cluster.sh stop {{dir}}
