#!/usr/bin/env bash
# kill -9 at random moments, then --resume, until the run is done: the final checkpoint must be the
# bytes of an uninterrupted run, whatever the moments (mid-step, mid-validation, mid-save), and the
# metrics must hold each step once.   kill_resume.sh CTGRAD [SEED]
# The moments are drawn within the first third of the uninterrupted run's wall time, measured here,
# so the test means the same on a fast idle host and a slow loaded one; after 60 kills a round runs
# to the end.
set -u
ctgrad=$(realpath "$1")
RANDOM=${2:-$$}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
args=(--set size=tiny --set steps=400 --set eval_every=10 --set batch=8 --set context=32 --set eval_windows=16 --set sample_tokens=0 --threads 2)
start=$(date +%s%N)
"$ctgrad" train gpt --run straight "${args[@]}" > straight.log 2>&1 || { cat straight.log; exit 1; }
straight_ms=$(( ($(date +%s%N) - start) / 1000000 ))
window_ms=$(( straight_ms / 3 ))
echo "the uninterrupted run took $straight_ms ms: kills at 0 to $window_ms ms into a round"
kills=0 resumes=0
for round in $(seq 1 200); do
  if [ -f run/checkpoint.safetensors ]; then mode=--resume resumes=$((resumes + 1)); else mode=--overwrite; fi
  "$ctgrad" train gpt --run run "$mode" "${args[@]}" > "round$round.log" 2>&1 &
  pid=$!
  if [ "$kills" -lt 60 ]; then
    delay_ms=$(( (RANDOM * 32768 + RANDOM) % (window_ms + 1) ))  # start-up, steps, validations, saves
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    if kill -9 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null
      kills=$((kills + 1))
      continue
    fi
  fi
  wait "$pid"
  rc=$?
  [ "$rc" -eq 0 ] || { echo "round $round exited $rc:"; cat "round$round.log"; exit 1; }
  if grep -q "nothing to train\|done after" "round$round.log"; then break; fi
done
grep -q "nothing to train\|done after" round*.log || { echo "the run did not finish in 200 rounds"; exit 1; }
echo "$kills kills with kill -9, $resumes rounds resumed"
cmp straight/checkpoint.safetensors run/checkpoint.safetensors || { echo "FAIL: the resumed run's checkpoint differs"; exit 1; }
/usr/bin/python3 -c '
import sys
steps = [int(l.split(",")[0]) for l in open("run/metrics.csv").read().splitlines()[1:]]
sys.exit(0 if steps == list(range(1, 401)) else "metrics.csv steps: %s" % steps)' || exit 1
ls -a run | grep -q "\.tmp\." && { echo "FAIL: a temporary file was left"; ls -a run; exit 1; }
echo "kill -9 and resume: identical checkpoint, each step once in the metrics, no temporary file left"
