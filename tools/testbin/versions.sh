# Versions of the test infrastructure. The wrapper modules in k8s/, etcd/, helm/, kustomize/ and coredns/ must require
# exactly these: after changing a version here, regenerate the wrapper of that component as
# docs/development.md says ("To move to another version").
K8S_VERSION=1.36.3
ETCD_VERSION=3.6.16
HELM_VERSION=3.22.0
# The newest kustomize whose module builds with Go 1.26 (v5.8.3 needs Go 1.27).
KUSTOMIZE_VERSION=5.8.2
COREDNS_VERSION=1.15.0
