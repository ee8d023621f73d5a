#!/usr/bin/env bash
# The local control plane: see cluster.py beside this script (run, start, stop).
set -euo pipefail
exec python3 "$(dirname "${BASH_SOURCE[0]}")/cluster.py" "$@"
