#!/usr/bin/env bash
# End-to-end test of the ctgrad command on the real KJV data: train, eval, sample, bad input, and
# Ctrl-C then --resume, which must end with the same checkpoint bytes as an uninterrupted run.
set -u
ctgrad=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
pass=0
fail=0
check() {  # name, expected exit code, command...
  local name=$1 want=$2
  shift 2
  "$@" > "$work/out.txt" 2>&1
  local rc=$?
  if [ "$rc" -eq "$want" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name: exit $rc, expected $want"; cat "$work/out.txt"; fi
}
expect_text() {  # name, text
  if grep -qF -- "$2" "$work/out.txt"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: no '$2' in:"; cat "$work/out.txt"; fi
}

common=(--set steps=60 --set eval_every=30 --set batch=8 --set context=32 --threads 2)
check "train" 0 "$ctgrad" train charlm --run straight "${common[@]}"
expect_text "train prints validation" "validation"
for f in checkpoint.safetensors tokenizer.json metrics.jsonl metrics.csv loss.png; do
  check "train writes $f" 0 test -s "straight/$f"
done
check "eval" 0 "$ctgrad" eval charlm --run straight
expect_text "eval prints the loss" "validation loss"
check "sample" 0 "$ctgrad" sample charlm --run straight --prompt "And God" --tokens 20
expect_text "sample continues the prompt" "And God"

# Ctrl-C mid-run saves a checkpoint; --resume finishes; the result equals an uninterrupted run.
long=(--set steps=300 --set eval_every=100 --set batch=8 --set context=32 --threads 2)
check "train long" 0 "$ctgrad" train charlm --run straight_long "${long[@]}"
"$ctgrad" train charlm --run interrupted "${long[@]}" > interrupted.log 2>&1 &
pid=$!
for _ in $(seq 1 400); do
  [ -f interrupted/metrics.csv ] && [ "$(wc -l < interrupted/metrics.csv)" -ge 12 ] && break
  sleep 0.02
done
kill -INT "$pid"
wait "$pid"
rc=$?
if [ "$rc" -eq 130 ] && grep -q "checkpoint saved" interrupted.log; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL ctrl-c: exit $rc"; cat interrupted.log; fi
check "resume" 0 "$ctgrad" train charlm --run interrupted --resume "${long[@]}"
expect_text "resume says where it starts" "resuming at step"
check "resumed run ends bit-identical" 0 cmp straight_long/checkpoint.safetensors interrupted/checkpoint.safetensors

# Bad input: a one-line error and a non-zero exit.
check "unknown key" 2 "$ctgrad" train charlm --set nope=1
expect_text "unknown key is named" "unknown config key 'nope'"
check "bad value" 2 "$ctgrad" train charlm --set steps=many
check "unknown model" 2 "$ctgrad" train gpt5
check "unknown char in prompt" 1 "$ctgrad" sample charlm --run straight --prompt "x ~ y"
expect_text "unknown char is named" "character '~' (byte 126) at position 2"
check "context too long" 2 "$ctgrad" train charlm --run other --set context=999
check "no checkpoint" 2 "$ctgrad" eval charlm --run nowhere
printf '{"steps": 5, "wrong": 1}' > bad.json
check "config file with unknown key" 2 "$ctgrad" train charlm --config bad.json
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
