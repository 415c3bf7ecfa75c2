#!/usr/bin/env bash
# Fine-tuning from the pretrained BERT against from scratch, the same recipe and steps, 3 seeds
# each: the table of docs/models/bert.md. usage:
#   bash bench/bert_finetune.sh [build dir] [pretrained run] [--set key=value ...]
# The pretrained run is a `ctgrad train bert` folder (runs/bert by default); both arms use its
# tokenizer. Runs go to a temporary folder; the table is printed at the end.
set -euo pipefail
build=$(realpath "${1:-build}")
pretrained=$(realpath "${2:-runs/bert}")
shift $(( $# > 2 ? 2 : $# ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for init in pretrained scratch; do
  for seed in 1 2 3; do
    echo "== $init, seed $seed"
    "$build/apps/ctgrad" finetune bert --task austen-novel --pretrained "$pretrained" --init "$init" --run "$work/$init-$seed" \
      --set seed="$seed" "$@" > "$work/$init-$seed.log"
    grep -E "majority|^done" "$work/$init-$seed.log"
  done
done
/usr/bin/python3 - "$work" <<'PY'
import json, statistics, sys, glob
work = sys.argv[1]
print("| encoder start | seed 1 | seed 2 | seed 3 | mean ± sd |")
print("|---|---|---|---|---|")
for init in ("pretrained", "scratch"):
    acc = []
    for seed in (1, 2, 3):
        rows = [json.loads(l) for l in open(f"{work}/{init}-{seed}/metrics.jsonl")]
        acc.append([r for r in rows if "val_accuracy" in r][-1]["val_accuracy"])
    print(f"| {init} | " + " | ".join(f"{a:.4f}" for a in acc) + f" | {statistics.mean(acc):.4f} ± {statistics.stdev(acc):.4f} |")
PY
