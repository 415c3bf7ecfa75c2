#!/usr/bin/env bash
# examples/own_model against an installed ctgrad: `cmake --install` into a scratch prefix, the
# example configured with find_package(ctgrad) and built, then its model through the whole
# command: help, check, train (on files the test writes), resume, eval, sample, ablate.
set -u
source "$(dirname "$0")/checks.sh"  # check, expect_text
build=$(realpath "$1")
src=$(realpath "$(dirname "$0")/../../examples/own_model")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export CTGRAD_CACHE="$work/cache"
check "install into a scratch prefix" 0 cmake --install "$build" --prefix "$work/prefix"
check "configure the example against it" 0 cmake -S "$src" -B own -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release
check "build it" 0 cmake --build own -j2
own=$work/own/own_model
mkdir -p notes && for i in $(seq 1 30); do for j in $(seq 1 20); do echo "story $i, line $j: once upon a time there was a model"; done > "notes/$i.txt"; done
tiny=(--set d_model=32 --set layers=2 --set heads=2 --set window=8 --set batch=4 --set context=32 --set eval_every=10 --set sample_tokens=16 --threads 1)
check "help names the model and its keys" 0 "$own" help alternating
expect_text "its own key" "window"
expect_text "the command's keys too" "data"
check "check builds it" 0 "$own" check alternating "${tiny[@]}"
expect_text "counts its parameters" "parameters"
check "train" 0 "$own" train alternating --run r1 --set data=notes --set steps=20 "${tiny[@]}"
expect_text "trains" "step 20/20"
expect_text "samples after training" "sample (temperature"
check "the loss plot" 0 test -s r1/loss.png
check "resume" 0 "$own" train alternating --run r1 --set data=notes --set steps=30 "${tiny[@]}" --resume
expect_text "resumed to 30" "step 30/30"
check "eval" 0 "$own" eval alternating --run r1
expect_text "a validation loss" "validation loss"
check "sample" 0 "$own" sample alternating --run r1 --prompt "story 3" --tokens 12
check "a bad key value is refused" 2 "$own" train alternating --run r2 --set window=0 "${tiny[@]}"
check "ablate over its own key and a command key" 0 "$own" ablate alternating --grid window=4,16 --grid lr=1e-3,3e-3 --seeds 1 --run study \
  --set data=notes --set steps=10 --set d_model=32 --set layers=2 --set heads=2 --set batch=4 --set context=32 --set eval_every=10 --set sample_tokens=0
expect_text "reports" "report"
check "the study's report" 0 test -s study/results.md
if command -v mpirun > /dev/null; then  # data-parallel: the same losses as one process (within float reassociation)
  mpirun=(mpirun --oversubscribe -np 2)
  [ "$(id -u)" -eq 0 ] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
  check "one process, for the comparison" 0 "$own" train alternating --run one --set data=notes --set steps=10 "${tiny[@]}" --set sample_tokens=0
  check "mpirun, 2 ranks" 0 "${mpirun[@]}" "$own" train alternating --run two --set data=notes --set steps=10 "${tiny[@]}" --set sample_tokens=0
  expect_text "data-parallel" "communication"
  check "the same validation loss" 0 /usr/bin/python3 -c "
import json, sys
a, b = ([json.loads(l) for l in open(d + '/metrics.jsonl') if 'val_loss' in l] for d in ('one', 'two'))
assert a and len(a) == len(b), (len(a), len(b))
assert abs(a[-1]['val_loss'] - b[-1]['val_loss']) < 1e-4 * abs(a[-1]['val_loss']), (a[-1], b[-1])"
fi
echo "own_model: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
