#!/usr/bin/env bash
# Fine-tuning from pretrained BERT runs against from scratch, the same recipe and steps, 3 seeds
# each: the table of docs/models/bert.md. usage:
#   bash bench/bert_finetune.sh BUILD_DIR PRETRAINED_RUN [MORE_RUNS ...] [-- --set key=value ...]
# Each run is a `ctgrad train bert` folder (one arm each); the scratch arm uses the first run's
# tokenizer. Runs go to a temporary folder; the table is printed at the end.
set -euo pipefail
build=$(realpath "$1")
shift
runs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do runs+=("$(realpath "$1")"); shift; done
[ $# -gt 0 ] && shift
[ ${#runs[@]} -gt 0 ] || { echo "usage: bash bench/bert_finetune.sh BUILD_DIR PRETRAINED_RUN [MORE_RUNS ...] [-- --set key=value ...]" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
arms=()
for r in "${runs[@]}" scratch; do
  for seed in 1 2 3; do
    if [ "$r" = scratch ]; then arm=scratch init=(--pretrained "${runs[0]}" --init scratch)
    else arm=$(basename "$r") init=(--pretrained "$r" --init pretrained); fi
    echo "== $arm, seed $seed"
    "$build/apps/ctgrad" finetune bert --task austen-novel "${init[@]}" --run "$work/$arm-$seed" --set seed="$seed" "$@" > "$work/$arm-$seed.log" 2>&1 || { cat "$work/$arm-$seed.log"; exit 1; }
    grep -E "loaded|majority|^done" "$work/$arm-$seed.log"
  done
  arms+=("$arm")
done
/usr/bin/python3 - "$work" "${arms[@]}" <<'PY'
import json, statistics, sys
work, arms = sys.argv[1], sys.argv[2:]
print("| encoder start | seed 1 | seed 2 | seed 3 | mean ± sd |")
print("|---|---|---|---|---|")
for arm in arms:
    acc = []
    for seed in (1, 2, 3):
        rows = [json.loads(l) for l in open(f"{work}/{arm}-{seed}/metrics.jsonl")]
        acc.append([r for r in rows if "val_accuracy" in r][-1]["val_accuracy"])
    print(f"| {arm} | " + " | ".join(f"{a:.4f}" for a in acc) + f" | {statistics.mean(acc):.4f} ± {statistics.stdev(acc):.4f} |")
PY
