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
# The last step a run has logged (0 before the first).
logged_step() { [ -s "$1/metrics.jsonl" ] && tail -1 "$1/metrics.jsonl" | sed -n 's/.*"step":\([0-9]*\).*/\1/p' || echo 0; }
step_at_least() { [ "$(logged_step "$1")" -ge "$2" ] 2>/dev/null; }
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
expect_text "status names the tasks" "Slurm job "
check "collected with --wait" 0 "$ctgrad" ablate "${grid[@]}" --run cluster --launcher slurm --wait
expect_text "writes the report" "report: cluster/results.md"
check "the same numbers as the local study" 0 cmp <(numbers local/results.csv) <(numbers cluster/results.csv)
for run in local/runs/*/seed*; do
  check "the same checkpoint: ${run#local/runs/}" 0 cmp "$run/checkpoint.safetensors" "cluster/${run#local/}/checkpoint.safetensors"
done
check "status when done" 0 "$ctgrad" ablate --run cluster --status
expect_text "all done" "8 runs: 8 done"
check "again: nothing to submit" 0 "$ctgrad" ablate "${grid[@]}" --run cluster --launcher slurm
expect_text "reports at once" "(0 to submit, 0 in Slurm's queue)"

# 2. Three runs, one at a time (the array's throttle): --status while pending and running; a local
# study refused while Slurm holds the runs; scancel mid-study keeps the finished run and the
# stopped one's checkpoint; the same command then submits the rest, which continue.
long=(--set size=tiny --set steps=1500 --set eval_every=100 --set context=64 --set batch=16 --set eval_windows=16 --set sample_tokens=0)
# (runs of 3000 steps: the checks between "the second is training" and scancel need seconds of it)
three=(gpt --grid norm=pre --seeds 3 --set size=tiny --set steps=3000 --set eval_every=100 --set context=64 --set batch=16 --set eval_windows=16 --set sample_tokens=0)
check "three runs, one at a time" 0 "$ctgrad" ablate "${three[@]}" --run cancel --launcher slurm --jobs 1
expect_text "throttled" "at most 1 at once"
job=$(job_of)
check "the first run ends" 0 wait_for 120 test -s cancel/runs/000_norm_pre/seed1/result.json
check "the second is training" 0 wait_for 60 step_at_least cancel/runs/000_norm_pre/seed2 200
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
# the same checkpoint as one uninterrupted run; and one warned of its time limit requeues itself.
check "a long run submitted" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run requeue --launcher slurm
job=$(job_of)
run=requeue/runs/000_norm_post/seed1
check "it is training" 0 wait_for 120 step_at_least "$run" 300
check "scontrol requeue" 0 scontrol requeue "${job}_0"
check "collected" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run requeue --launcher slurm --wait
check "the task ran again" 0 grep -q "restart 1" requeue/slurm/logs/${job}_0.log
check "it saved when stopped" 0 grep -q "stopped: checkpoint saved" requeue/slurm/logs/${job}_0.log
check "uninterrupted, locally" 0 "$ctgrad" train gpt --run straight "${long[@]}" --set norm=post --set seed=1 --threads 2
check "byte-identical checkpoint" 0 cmp "$run/checkpoint.safetensors" straight/checkpoint.safetensors
# Near a time limit Slurm sends the task USR1 (sbatch --signal=B:USR1@120); scancel sends it now.
check "another long run" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run timelimit --launcher slurm
job=$(job_of)
check "it is training too" 0 wait_for 120 step_at_least timelimit/runs/000_norm_post/seed1 300
check "the time limit's warning" 0 scancel --batch --signal=USR1 "${job}_0"
check "collected after it" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run timelimit --launcher slurm --wait
check "it saved and requeued itself" 0 grep -q "the time limit is near: checkpoint saved; the task is requeued" timelimit/slurm/logs/${job}_0.log
check "and ran again" 0 grep -q "restart 1" timelimit/slurm/logs/${job}_0.log
check "byte-identical after the time limit" 0 cmp timelimit/runs/000_norm_post/seed1/checkpoint.safetensors straight/checkpoint.safetensors
# A node lost mid-run: its processes die at once, without a word (kill -9 of the task and its run);
# the run keeps the checkpoint of its last validation, and the same command submits it again.
check "a run on a node about to be lost" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run lost --launcher slurm
job=$(job_of)
check "it is training before the loss" 0 wait_for 120 step_at_least lost/runs/000_norm_post/seed1 300
check "the node's processes killed" 0 kill -9 $(pgrep -f "$work/lost/")
check "the task leaves the queue" 0 wait_for 60 queue_empty "$job"
no_file "no outcome recorded" lost/runs/000_norm_post/seed1/failed.json
check "status: stopped, with a checkpoint" 0 "$ctgrad" ablate --run lost --status
expect_text "stopped" "stopped      a checkpoint"
expect_text "names its task's log" "its last task's log: slurm/logs/${job}_0.log"
check "the same command submits it again" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run lost --launcher slurm --wait
expect_text "one to submit" "(1 to submit, 0 in Slurm's queue)"
check "the lost run continued to the same checkpoint" 0 cmp lost/runs/000_norm_post/seed1/checkpoint.safetensors straight/checkpoint.safetensors

# A data-parallel run of 2 ranks (srun within the task) warned of its time limit: srun passes the
# stop on to the ranks (as USR2: a SIGTERM it would turn into SIGKILL), they save, and it continues.
check "a run of 2 ranks" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run ranks --launcher slurm --ranks-per-run 2
job=$(job_of)
check "it is training on 2 ranks" 0 wait_for 120 step_at_least ranks/runs/000_norm_post/seed1 300
check "its time limit's warning" 0 scancel --batch --signal=USR1 "${job}_0"
check "collected after it too" 0 "$ctgrad" ablate gpt --grid norm=post --seeds 1 "${long[@]}" --run ranks --launcher slurm --ranks-per-run 2 --wait
check "it trained data-parallel" 0 grep -q "data parallel: 2 ranks" ranks/runs/000_norm_post/seed1/train.log
check "its ranks saved, and it requeued itself" 0 grep -q "the time limit is near: checkpoint saved; the task is requeued" ranks/slurm/logs/${job}_0.log
check "the 2-rank run continued" 0 grep -q "resuming at step" ranks/runs/000_norm_post/seed1/train.log
check "uninterrupted, 2 ranks under srun" 0 srun --mpi=pmix --ntasks=2 "$ctgrad" train gpt --run "$work/straight2" "${long[@]}" --set norm=post --set seed=1 --threads 1
check "the uninterrupted 2-rank checkpoint" 0 cmp ranks/runs/000_norm_post/seed1/checkpoint.safetensors straight2/checkpoint.safetensors

# 4. A failed run: named in the status, and run again with --retry-failed.
check "a diverging learning rate" 1 "$ctgrad" ablate gpt --grid init_std=0.02,1e30 --seeds 1 "${study[@]}" --run diverge --launcher slurm --wait
expect_text "the study is incomplete" "1 of 2 runs failed"
expect_text "says how to retry" "--retry-failed"
check "status names it" 0 "$ctgrad" ablate --run diverge --status
expect_text "failed, diverged" "exit 3 (training diverged)"
check "retried on Slurm" 1 "$ctgrad" ablate gpt --grid init_std=0.02,1e30 --seeds 1 "${study[@]}" --run diverge --launcher slurm --wait --retry-failed
expect_text "submits it again" "(1 to submit, 0 in Slurm's queue)"
check "a second array" 0 test -s diverge/slurm/array-2.json
retry_job=$(sed -n 's/.*"job": "\([0-9]*\)".*/\1/p' diverge/slurm/array-2.json)
check "the retried task ran, and failed again" 0 grep -q "failed (exit 3)" "diverge/slurm/logs/${retry_job}_0.log"

# 5. Refusals, one line each, nothing submitted.
check "sbatch absent" 2 env PATH=/nonexistent "$ctgrad" ablate "${grid[@]}" --run x1 --launcher slurm
expect_text "names sbatch" "sbatch is not on PATH"
check "a partition of other machines, a local disk" 2 "$ctgrad" ablate "${grid[@]}" --run x2 --launcher slurm --slurm-arg=--partition=remote
expect_text "says how it judged" "by its statfs type"
expect_text "names the other machine" "ghost"
check "--threads on Slurm" 2 "$ctgrad" ablate "${grid[@]}" --run x3 --launcher slurm --threads 2
expect_text "names --cpus-per-run" "on Slurm give each run's cores with --cpus-per-run"
check "--array is ctgrad's" 2 "$ctgrad" ablate "${grid[@]}" --run x4 --launcher slurm --slurm-arg=--array=0-3
expect_text "says ctgrad sets it" "--slurm-arg=--array=0-3: ctgrad sets --array itself"
check "another cluster" 2 "$ctgrad" ablate "${grid[@]}" --run x4 --launcher slurm --slurm-arg=-M --slurm-arg=other
expect_text "says why" "submitted to the cluster of this login node"
check "--wait without Slurm" 2 "$ctgrad" ablate "${grid[@]}" --run x5 --wait
expect_text "says to add the launcher" "--wait is for a study on Slurm: add --launcher slurm"
check "an unknown launcher" 2 "$ctgrad" ablate "${grid[@]}" --run x6 --launcher pbs
expect_text "names the choices" "--launcher pbs: local or slurm"
check "status of no study" 2 "$ctgrad" ablate --run nowhere --status
expect_text "says there is none" "nowhere holds no study"
check "a task outside Slurm" 2 env -u SLURM_ARRAY_TASK_ID "$ctgrad" ablate --slurm-task cluster/slurm/array-1.json
expect_text "says what it is for" "SLURM_ARRAY_TASK_ID is not set"
check "a task of another job" 2 env SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_JOB_ID=999999 "$ctgrad" ablate --slurm-task cluster/slurm/array-1.json
expect_text "refuses it" "is not the job of"
for d in x1 x2 x3 x4 x5 x6; do no_file "nothing made for $d" "$d"; done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
