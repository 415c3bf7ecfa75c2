#!/usr/bin/env bash
# Longer fuzzing of the readers of untrusted input (safetensors, configs, IDX, text, token shards) than CI's bounded run:
#   bash scripts/fuzz.sh [SECONDS per target, default 600] [WORK, default build/fuzz-long]
# New interesting inputs stay in WORK/<target>/corpus; copy the small ones into tests/fuzz/corpus/.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/tests/fuzz/run.sh" "${2:-$here/build/fuzz-long}" "${1:-600}"
