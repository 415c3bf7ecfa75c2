#!/usr/bin/env bash
# The PyTorch anchor of docs/models/transformer.md beside a ctgrad run: exports the run's batches,
# trains bench/reference/train_transformer.py on them for the same wall-clock budget, decodes the
# test split with the same beam search, and scores both with the same BLEU (ctgrad-bleu).
# usage: bash bench/transformer_anchor.sh BUILD_DIR RUN_DIR MINUTES [STEPS]
#   RUN_DIR: a trained `ctgrad train transformer` run (its config, tokenizer and split are used);
#   STEPS: the steps to export (the run's `steps` by default).
#   AVERAGE=K (environment): both sides decode the mean of their last K checkpoints (ctgrad: the run's
#   kept checkpoints, `ctgrad average-checkpoints`; PyTorch: its weights at the last K validations).
#   THREADS=N (environment, default 2): PyTorch's threads (1 when ctgrad trains beside it on the other core).
set -euo pipefail
build=$(realpath "$1")
run=$(realpath "$2")
minutes=$3
steps=${4:-$(python3 -c "import json,sys; print(json.load(open('$run/run.json'))['config']['steps'])")}
out=$run/anchor
mkdir -p "$out"
"$build/apps/ctgrad" export-batches transformer --run "$run" --steps "$steps" --out "$out/batches.safetensors" --overwrite
OMP_NUM_THREADS=${THREADS:-2} LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 -E -s \
  "$(dirname "$0")/reference/train_transformer.py" "$out/batches.safetensors" "$out/pytorch.ids" --minutes "$minutes" ${AVERAGE:+--average "$AVERAGE"} | tee "$out/pytorch.jsonl"
spm_decode --model "$run/tokenizer.model" --input_format=id < "$out/pytorch.ids" > "$out/pytorch.de"
echo "PyTorch, beam 4, alpha 0.6, test split:"
"$build/apps/ctgrad-bleu" "$out/pytorch.de" "$out/batches.safetensors.test.de"
echo "ctgrad (same run's checkpoint; the same beam settings):"
checkpoint=()
if [ "${AVERAGE:-0}" -gt 0 ]; then
  "$build/apps/ctgrad" average-checkpoints transformer --run "$run" --last "$AVERAGE" --out averaged.safetensors  # a file of the run folder
  checkpoint=(--checkpoint averaged.safetensors)
fi
"$build/apps/ctgrad" eval transformer --run "$run" "${checkpoint[@]}" --threads "${THREADS:-2}" | grep -E "^(test split|greedy|beam)"
