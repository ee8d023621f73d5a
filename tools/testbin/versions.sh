# Versions of the test infrastructure. The wrapper modules in k8s/, etcd/ and helm/ must require
# exactly these; regenerate them with `tools/testbin/regen.sh` after changing a version here.
K8S_VERSION=1.36.3
ETCD_VERSION=3.6.16
HELM_VERSION=3.22.0
