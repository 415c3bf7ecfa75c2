#!/usr/bin/env bash
# The baby-GPT recipe on KJV, ctgrad then PyTorch, one after the other on this machine, and the
# table of docs/models/gpt.md. usage: bash bench/reference/compare_gpt.sh [build dir] [steps]
# PyTorch runs at its best here: 2 threads, with the OpenMP build of OpenBLAS (Debian's default
# pthread build beside torch's OpenMP pool is much slower on 2 cores).
set -euo pipefail
build=$(realpath "${1:-build}")
steps=${2:-2000}
here=$(dirname "$(realpath "$0")")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== ctgrad ($steps steps)"
/usr/bin/time -f "%e s wall, %M KB peak RSS" "$build/apps/ctgrad" train gpt --run "$work/ctgrad" --threads 2 \
  --set steps="$steps" --set sample_tokens=0 > "$work/ctgrad.log"
grep -E "^ctgrad|^KJV|validation|^done" "$work/ctgrad.log"
echo "== PyTorch ($steps steps)"
omp=/usr/lib/x86_64-linux-gnu/openblas-openmp
OMP_NUM_THREADS=2 LD_LIBRARY_PATH="$omp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" /usr/bin/time -f "%e s wall, %M KB peak RSS" \
  /usr/bin/python3 "$here/train_gpt.py" --steps "$steps" | tee "$work/torch.jsonl"
/usr/bin/python3 - "$work/ctgrad/metrics.jsonl" "$work/torch.jsonl" <<'PY'
import json, sys
c = {r["step"]: r for r in map(json.loads, open(sys.argv[1])) if "val_loss" in r}
t = {r["step"]: r for r in map(json.loads, open(sys.argv[2])) if "val_loss" in r}
print("| step | ctgrad val loss | PyTorch val loss | ctgrad train time | PyTorch train time |")
print("|---|---|---|---|---|")
for s in sorted(c):
    if s in t:
        print(f"| {s} | {c[s]['val_loss']:.4f} | {t[s]['val_loss']:.4f} | {c[s]['train_seconds']:.1f} s | {t[s]['train_seconds']:.1f} s |")
PY
