#!/usr/bin/env bash
# docs/models/transformer.md's translation recipe, ctgrad and its PyTorch anchor trained at the same
# time on one core each (a 2-core machine: neither waits for the other), on the same batches, for
# the same training time; then both decode the test split with the same beam search, averaged over
# their last K checkpoints, and ctgrad-bleu scores both.
# usage: bash bench/transformer_side_by_side.sh BUILD_DIR RUN_DIR MINUTES STEPS K [--set key=value ...]
#   STEPS: ctgrad's steps (choose them to take MINUTES here; PyTorch stops at MINUTES of training or
#   at STEPS); K: checkpoints averaged (keep_checkpoints=K is set); the --set keys go to the run.
#   TEST_LIMIT=N (environment): a smoke run decodes the first N test sentences only (both sides; for
#   ctgrad also pass --set eval_sentences=N).
set -euo pipefail
build=$(realpath "$1")
run=$2
minutes=$3
steps=$4
keep=$5
shift 5
ctgrad=$build/apps/ctgrad
here=$(dirname "$(realpath "$0")")
mkdir -p "$(dirname "$run")"
# One step first: the run folder then holds the tokenizer and the config the batches are made with
# (a function of the step), so both sides start together from the exported batches.
"$ctgrad" train transformer --run "$run" --overwrite --threads 1 --set steps=1 "$@" > "$run.log" 2>&1
mkdir -p "$run/anchor"
"$ctgrad" export-batches transformer --run "$run" --steps "$steps" --out "$run/anchor/batches.safetensors" --overwrite
# keep_checkpoints only now: the step-1 checkpoint must not be one of the averaged.
"$ctgrad" train transformer --run "$run" --resume --threads 1 --set steps="$steps" --set keep_checkpoints="$keep" >> "$run.log" 2>&1 &
ctgrad_pid=$!
OMP_NUM_THREADS=1 LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 -E -s "$here/reference/train_transformer.py" \
  "$run/anchor/batches.safetensors" "$run/anchor/pytorch.ids" --minutes "$minutes" --average "$keep" ${TEST_LIMIT:+--test-limit "$TEST_LIMIT"} > "$run/anchor/pytorch.jsonl" 2>&1 &
pytorch_pid=$!
trap 'kill $pytorch_pid 2>/dev/null || true' EXIT  # ctgrad failing must not leave PyTorch running
wait $ctgrad_pid
# ctgrad evaluates on its core while PyTorch is still decoding on the other.
"$ctgrad" average-checkpoints transformer --run "$run" --last "$keep" --out averaged.safetensors
"$ctgrad" eval transformer --run "$run" --threads 1 > "$run/anchor/ctgrad_last.txt"
"$ctgrad" eval transformer --run "$run" --checkpoint averaged.safetensors --threads 1 > "$run/anchor/ctgrad_averaged.txt"
wait $pytorch_pid
spm_decode --model "$run/tokenizer.model" --input_format=id < "$run/anchor/pytorch.ids" > "$run/anchor/pytorch.de"
{
  echo "PyTorch (mean of its weights at its last validations, up to $keep: the "averaged" line says how many), beam 4, alpha 0.6, test split:"
  tail -n 3 "$run/anchor/pytorch.jsonl"
  head -n "${TEST_LIMIT:--0}" "$run/anchor/batches.safetensors.test.de" > "$run/anchor/reference.de"
  "$build/apps/ctgrad-bleu" "$run/anchor/pytorch.de" "$run/anchor/reference.de"
  echo "ctgrad, the last checkpoint:"
  cat "$run/anchor/ctgrad_last.txt"
  echo "ctgrad, the mean of the last $keep checkpoints:"
  cat "$run/anchor/ctgrad_averaged.txt"
} | tee "$run/anchor/result.txt"
