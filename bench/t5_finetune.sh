#!/usr/bin/env bash
# The fine-tuning table of docs/models/t5.md: each task from the pretrained run and from scratch
# (the same vocabulary, recipe and steps), and the three tasks as one mixture, all with one seed.
# usage: bash bench/t5_finetune.sh BUILD_DIR PRETRAINED_RUN OUT_DIR [--set key=value ...]
# Each run's log is OUT_DIR/<name>.log; the scores are printed at the end.
set -euo pipefail
build=$(realpath "$1")
pre=$(realpath "$2")
out=$3
shift 3
mkdir -p "$out"
extra=("$@")
for task in translate-en-de austen-novel; do
  for init in pretrained scratch; do
    name=$task-$init
    echo "== $name"
    "$build/apps/ctgrad" finetune t5 --task "$task" --pretrained "$pre" --init "$init" --run "$out/$name" --overwrite "${extra[@]}" > "$out/$name.log" 2>&1 ||
      { tail -20 "$out/$name.log"; exit 1; }
    grep -E "done after|: accuracy|BLEU" "$out/$name.log" | sed 's/^/   /'
  done
done
for init in pretrained scratch; do
  name=mix-$init
  echo "== $name"
  "$build/apps/ctgrad" finetune t5 --task mix:translate-en-de,translate-de-en,austen-novel --pretrained "$pre" --init "$init" --run "$out/$name" \
    --overwrite "${extra[@]}" > "$out/$name.log" 2>&1 || { tail -20 "$out/$name.log"; exit 1; }
  grep -E "done after|: accuracy|BLEU" "$out/$name.log" | sed 's/^/   /'
done
