#!/usr/bin/env bash
# Every architecture key of every model at the ends and the middle of the range `ctgrad help`
# documents for it (and every value of a choice): `ctgrad check` builds the model, or refuses the
# value with exit 2 and one line naming the key (or the keys it conflicts with, or the memory it
# would need). A value the help promises is never "not compiled", a crash or a cascade.
set -u
source "$(dirname "$0")/checks.sh"  # check, expect_text, no_text, no_file
ctgrad=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# One value of one key: built (exit 0), or refused in one line that says why.
try() {  # model, key, value
  local model=$1 key=$2 value=$3
  # In 2 GB of address space: a model past that is refused by the memory check, not built slowly.
  # One thread: the address-space bound must not depend on the host's core count (thread stacks, BLAS buffers).
  (ulimit -v 2000000 && OPENBLAS_NUM_THREADS=1 exec "$ctgrad" check "$model" --set "$key=$value" --threads 1) > out.txt 2> err.txt
  local rc=$?
  if [ "$rc" -eq 0 ] && grep -q "the config makes a model of" out.txt; then
    pass=$((pass + 1))
  elif [ "$rc" -eq 2 ] && [ "$(wc -l < err.txt)" -eq 1 ] && grep -qE "ctgrad: .*($key|parameters|heads|d_model|patch|layers)" err.txt; then
    pass=$((pass + 1))
    echo "$model $key=$value: refused: $(cat err.txt)" >> refused.txt
  else
    fail=$((fail + 1))
    echo "FAIL $model $key=$value: exit $rc"
    cat out.txt err.txt
  fi
}

models=0
for model in gpt llama transformer seq2seq vit bert bert-finetune t5 t5-finetune; do
  "$ctgrad" help "$model" > help.txt 2>&1 || { fail=$((fail + 1)); echo "FAIL help $model"; continue; }
  models=$((models + 1))
  # "  d_model         0  (integer in [0, 65536])  architecture: the width ..."
  while read -r key lo hi; do
    try "$model" "$key" "$lo"
    try "$model" "$key" "$(( (lo + hi) / 2 ))"
    try "$model" "$key" "$hi"
  done < <(sed -nE 's/^  ([a-z_]+) +-?[0-9]+  \(integer in \[(-?[0-9]+), ([0-9]+)\]\)  architecture:.*/\1 \2 \3/p' help.txt)
  # "  act             gelu  (relu|gelu|gelu_tanh|swiglu)  architecture: ..."
  while read -r key values; do
    for v in ${values//|/ }; do try "$model" "$key" "$v"; done
  done < <(sed -nE 's/^  ([a-z_]+) +[^ ]+  \(([a-z0-9_|+-]+)\)  architecture:.*/\1 \2/p' help.txt)
done
check "every model's help was read" 0 test "$models" -eq 9
# The ranges tried are the ones the help shows: at least the GPT's width and depth.
check "the GPT's size keys were among them" 0 grep -q "gpt d_model=65536: refused: ctgrad: the model has" refused.txt
echo "key_ranges: $pass passed, $fail failed ($(wc -l < refused.txt) values refused, each in one line)"
[ "$fail" -eq 0 ]
