#!/usr/bin/env bash
# The local control plane: `cluster.sh run|start DIR [--crds CRD_DIR]`, `cluster.sh stop DIR`.
# Builds the workspace's binaries if needed (as hack/test.sh does, so nothing is built twice)
# and runs olm-cluster (the cluster/ crate; docs/development.md says what each command does).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cargo build --quiet --locked --manifest-path "$root/Cargo.toml" --workspace --bins
exec "${CARGO_TARGET_DIR:-$root/target}/debug/olm-cluster" "$@"
