#!/usr/bin/env bash
# The PyTorch anchor of docs/models/transformer.md beside a ctgrad run: exports the run's batches,
# trains bench/reference/train_transformer.py on them for the same wall-clock budget, decodes the
# test split with the same beam search, and scores both with the same BLEU (ctgrad-bleu).
# usage: bash bench/transformer_anchor.sh BUILD_DIR RUN_DIR MINUTES [STEPS]
#   RUN_DIR: a trained `ctgrad train transformer` run (its config, tokenizer and split are used);
#   STEPS: the steps to export (the run's `steps` by default).
set -euo pipefail
build=$(realpath "$1")
run=$(realpath "$2")
minutes=$3
steps=${4:-$(python3 -c "import json,sys; print(json.load(open('$run/run.json'))['config']['steps'])")}
out=$run/anchor
mkdir -p "$out"
"$build/apps/ctgrad" export-batches transformer --run "$run" --steps "$steps" --out "$out/batches.safetensors"
OMP_NUM_THREADS=2 LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 -E -s \
  "$(dirname "$0")/reference/train_transformer.py" "$out/batches.safetensors" "$out/pytorch.ids" --minutes "$minutes" | tee "$out/pytorch.jsonl"
spm_decode --model "$run/tokenizer.model" --input_format=id < "$out/pytorch.ids" > "$out/pytorch.de"
echo "PyTorch, beam 4, alpha 0.6, test split:"
"$build/apps/ctgrad-bleu" "$out/pytorch.de" "$out/batches.safetensors.test.de"
echo "ctgrad (same run's checkpoint; the same beam settings):"
"$build/apps/ctgrad" eval transformer --run "$run" | grep -E "^(test split|greedy|beam)"
