#!/usr/bin/env bash
# Every test of olm-rs: formatting, lints, unit tests, the CRD drift check, and the end-to-end
# tests against a real local control plane (started once by the e2e harness, stopped when the
# tests exit). Installs what it needs; the control plane build is cached by version.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source hack/prereqs.sh
start=$SECONDS
ensure_prereqs
echo "test: prerequisites ready after $((SECONDS - start))s" >&2

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The e2e tests run the manager binaries as local processes.
cargo build --workspace --bins --locked
cargo test --workspace --locked --no-fail-fast
echo "test: all tests passed in $((SECONDS - start))s" >&2
