#!/usr/bin/env bash
# `ctgrad ablate --launcher slurm` against a real Slurm (tests/slurm/cluster.sh, the fixture): a
# 2 x 2 x 2-seed study through sbatch reports what the same study run locally reports, checkpoint
# for checkpoint; --status while runs are pending and running; a task requeued mid-run continues
# its run byte for byte; scancel mid-study keeps the finished runs, and the same command again
# submits the rest; a failed run named and retried; the refusals. Skipped (exit 77) when the
# fixture could not start the daemons.
set -u
source "$(dirname "$0")/../apps/checks.sh"  # check, expect_text
ctgrad=$(realpath "$1")
cluster=$2
if [ ! -s "$cluster/env" ]; then
  echo "skipped: $(cat "$cluster/unavailable" 2>/dev/null || echo "the test Slurm's fixture (slurm.start) did not run")"
  exit 77
fi
source "$cluster/env"
work=$(mktemp -d)
trap 'scancel --name=ctgrad-ablate > /dev/null 2>&1; rm -rf "$work"' EXIT
cd "$work"
export CTGRAD_CACHE="$work/cache"

# Waits up to $1 seconds for a command to succeed.
wait_for() {
  local secs=$1
  shift
  for _ in $(seq $((secs * 5))); do "$@" > /dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}
# The highest step a run has validated at (0 before the first).
validated_step() { [ -s "$1/metrics.jsonl" ] && tail -1 "$1/metrics.jsonl" | sed -n 's/.*"step":\([0-9]*\).*/\1/p' || echo 0; }
step_at_least() { [ "$(validated_step "$1")" -ge "$2" ] 2>/dev/null; }
queue_empty() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }
job_of() { sed -n 's/^submitted to Slurm as job \([0-9]*\).*/\1/p' "$work/out.txt"; }
# results.csv without its training-time column (wall time differs between any two runs).
numbers() { /usr/bin/python3 -c 'import csv,sys
rows = list(csv.reader(open(sys.argv[1])))
i = rows[0].index("train_seconds")
for r in rows: print(r[:i] + r[i + 1:])' "$1"; }

# 1. The same study, locally and on Slurm.
study=(--set size=tiny --set steps=20 --set eval_every=10 --set context=32 --set batch=8 --set eval_windows=16 --set sample_tokens=0)
grid=(gpt --grid norm=pre,post --grid lr=1e-3,3e-3 --seeds 2 "${study[@]}")
check "the study, locally" 0 "$ctgrad" ablate "${grid[@]}" --run local --jobs 2
check "the study, submitted" 0 "$ctgrad" ablate "${grid[@]}" --run cluster --launcher slurm
expect_text "says what it submits" "8 runs (8 to submit, 0 in Slurm's queue)"
expect_text "prints the job id" "submitted to Slurm as job "
expect_text "says how to collect" "run this command again (or with --wait)"
check "the array is one job of 8 tasks" 0 grep -q -- '--array=0-7' cluster/slurm/array-1.json
check "status at once" 0 "$ctgrad" ablate --run cluster --status
expect_text "status counts the runs" "8 runs:"
check "collected with --wait" 0 "$ctgrad" ablate "${grid[@]}" --run cluster --launcher slurm --wait
expect_text "writes the report" "report: cluster/results.md"
check "the same numbers as the local study" 0 cmp <(numbers local/results.csv) <(numbers cluster/results.csv)
for run in local/runs/*/seed*; do
  check "the same checkpoint: ${run#local/runs/}" 0 cmp "$run/checkpoint.safetensors" "cluster/${run#local/}/checkpoint.safetensors"
done
check "status when done" 0 "$ctgrad" ablate --run cluster --status
expect_text "all done" "8 runs: 8 done"
check "again: nothing to submit" 0 "$ctgrad" ablate "${grid[@]}" --run cluster --launcher slurm
expect_text "reports at once" "(0 to run)"

# 2. Three runs, one at a time (the array's throttle): --status while pending and running; a local
# study refused while Slurm holds the runs; scancel mid-study keeps the finished run and the
# stopped one's checkpoint; the same command then submits the rest, which continue.
long=(--set size=tiny --set steps=1500 --set eval_every=100 --set context=64 --set batch=16 --set eval_windows=16 --set sample_tokens=0)
three=(gpt --grid norm=pre --seeds 3 "${long[@]}")
check "three runs, one at a time" 0 "$ctgrad" ablate "${three[@]}" --run cancel --launcher slurm --jobs 1
expect_text "throttled" "at most 1 at once"
job=$(job_of)
check "the first run ends" 0 wait_for 120 test -s cancel/runs/000_norm_pre/seed1/result.json
check "the second has validated" 0 wait_for 60 step_at_least cancel/runs/000_norm_pre/seed2 200
check "status while running" 0 "$ctgrad" ablate --run cancel --status
expect_text "one done" "1 done"
expect_text "one running" "1 running"
expect_text "one pending" "1 pending"
expect_text "names the task" "running      Slurm job ${job}_1"
expect_text "says why pending" "(JobArrayTaskLimit)"
check "a local study refused meanwhile" 2 "$ctgrad" ablate "${three[@]}" --run cancel
expect_text "names the queue" "the study's runs are in Slurm's queue"
"$ctgrad" ablate "${three[@]}" --run cancel --launcher slurm --jobs 1 --wait > waiter.txt 2>&1 &
waiter=$!
check "a waiting ablate holds the folder" 0 wait_for 30 grep -q "on Slurm:" waiter.txt
check "a second ablate refused meanwhile" 2 "$ctgrad" ablate "${three[@]}" --run cancel --launcher slurm --jobs 1
expect_text "names the holder" "is in use by another ctgrad ablate (pid $waiter)"
kill -TERM "$waiter"
wait "$waiter"
rc=$?
check "a stopped wait exits 130" 0 test "$rc" -eq 130
check "it says the runs go on" 0 grep -q "stopped waiting: the runs go on in Slurm" waiter.txt
check "and they do" 0 test -n "$(squeue -h -j "$job" 2>/dev/null)"
finished=$(md5sum cancel/runs/000_norm_pre/seed1/result.json cancel/runs/000_norm_pre/seed1/checkpoint.safetensors)
check "scancel" 0 scancel "$job"
check "the array leaves the queue" 0 wait_for 60 queue_empty "$job"
check "the stopped run kept a checkpoint" 0 test -s cancel/runs/000_norm_pre/seed2/checkpoint.safetensors
check "status after scancel" 0 "$ctgrad" ablate --run cancel --status
expect_text "the stopped run" "stopped"
expect_text "the run never started" "not started"
check "the finished run intact" 0 test "$finished" = "$(md5sum cancel/runs/000_norm_pre/seed1/result.json cancel/runs/000_norm_pre/seed1/checkpoint.safetensors)"
check "the same command again" 0 "$ctgrad" ablate "${three[@]}" --run cancel --launcher slurm --jobs 1 --wait
expect_text "submits the two left" "(2 to submit, 0 in Slurm's queue)"
check "the finished run untouched" 0 test "$finished" = "$(md5sum cancel/runs/000_norm_pre/seed1/result.json cancel/runs/000_norm_pre/seed1/checkpoint.safetensors)"
check "the stopped run continued" 0 grep -q "resuming at step" cancel/runs/000_norm_pre/seed2/train.log
check "status: all done" 0 "$ctgrad" ablate --run cancel --status
expect_text "three done" "3 runs: 3 done"

# 3. A task requeued mid-run (as preemption requeues it) saves, exits, starts again and continues:
# the same checkpoint as one uninterrupted run.
check "a long run submitted" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run requeue --launcher slurm
job=$(job_of)
run=requeue/runs/000_norm_post/seed1
check "it has validated" 0 wait_for 120 step_at_least "$run" 300
check "scontrol requeue" 0 scontrol requeue "${job}_0"
check "collected" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run requeue --launcher slurm --wait
check "the task ran again" 0 grep -q "restart 1" requeue/slurm/logs/${job}_0.log
check "it saved when stopped" 0 grep -q "stopped: checkpoint saved" requeue/slurm/logs/${job}_0.log
check "uninterrupted, locally" 0 "$ctgrad" train gpt --run straight "${long[@]}" --set norm=post --set seed=1 --threads 2
check "byte-identical checkpoint" 0 cmp "$run/checkpoint.safetensors" straight/checkpoint.safetensors

# 4. A failed run: named in the status, and run again with --retry-failed.
check "a diverging learning rate" 1 "$ctgrad" ablate gpt --grid init_std=0.02,1e30 --seeds 1 "${study[@]}" --run diverge --launcher slurm --wait
expect_text "the study is incomplete" "1 of 2 runs failed"
expect_text "says how to retry" "--retry-failed"
check "status names it" 0 "$ctgrad" ablate --run diverge --status
expect_text "failed, diverged" "exit 3 (training diverged)"
check "retried on Slurm" 1 "$ctgrad" ablate gpt --grid init_std=0.02,1e30 --seeds 1 "${study[@]}" --run diverge --launcher slurm --wait --retry-failed
expect_text "submits it again" "(1 to submit, 0 in Slurm's queue)"
check "a second array" 0 test -s diverge/slurm/array-2.json

# 5. Refusals, one line each, nothing submitted.
check "sbatch absent" 2 env PATH=/nonexistent "$ctgrad" ablate "${grid[@]}" --run x1 --launcher slurm
expect_text "names sbatch" "sbatch is not on PATH"
check "a partition of other machines, a local disk" 2 "$ctgrad" ablate "${grid[@]}" --run x2 --launcher slurm --slurm-arg=--partition=remote
expect_text "says how it judged" "by its statfs type"
expect_text "names the other machine" "ghost"
check "--threads on Slurm" 2 "$ctgrad" ablate "${grid[@]}" --run x3 --launcher slurm --threads 2
check "--array is ctgrad's" 2 "$ctgrad" ablate "${grid[@]}" --run x4 --launcher slurm --slurm-arg=--array=0-3
check "--wait without Slurm" 2 "$ctgrad" ablate "${grid[@]}" --run x5 --wait
check "an unknown launcher" 2 "$ctgrad" ablate "${grid[@]}" --run x6 --launcher pbs
check "status of no study" 2 "$ctgrad" ablate --run nowhere --status
check "a task outside Slurm" 2 env -u SLURM_ARRAY_TASK_ID "$ctgrad" ablate --slurm-task cluster/slurm/array-1.json
for d in x1 x2 x3 x4 x5 x6; do no_file "nothing made for $d" "$d"; done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
