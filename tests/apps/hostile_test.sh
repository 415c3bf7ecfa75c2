#!/usr/bin/env bash
# The command against an adversarial user (docs/reliability.md): strings that would run code in
# another language, studies that would wrap or crash, inputs an --overwrite would delete, launchers,
# killed studies, late failures. Each check is a regression test of one defect found by a hostile probe.
set -u
source "$(dirname "$0")/checks.sh"  # check, expect_text
ctgrad=$(realpath "$1")
work=$(mktemp -d)
trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
export CTGRAD_CACHE="$work/cache"
tiny=(--set size=tiny --set steps=2 --set eval_every=2 --set batch=4 --set eval_windows=4 --set sample_tokens=0 --threads 1)
one_line() {  # name: the last check's output is one line
  if [ "$(wc -l < "$work/out.txt")" -le 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: more than one line:"; cat "$work/out.txt"; fi
}
wait_for_rows() {  # metrics.csv: waits (up to 150 s) until the training has logged two steps
  for _ in $(seq 1 3000); do [ -f "$1" ] && [ "$(wc -l < "$1")" -ge 3 ] && return; sleep 0.05; done
}
long=(--set size=tiny --set steps=100000 --set eval_every=50 --set batch=4 --set eval_windows=4 --set sample_tokens=0)
start_long_study() {  # folder, log: a study of one long run, its pid in $pid once the run trains
  "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${long[@]}" --run "$1" --threads 1 > "$2" 2>&1 &
  pid=$!
  wait_for_rows "$1/runs/000_lr_1e-3/seed1/metrics.csv"
}

# 1. Strings into gnuplot: control characters refused up front; quotes and shell syntax are data.
check "a newline in --run" 2 "$ctgrad" train gpt --run $'r\nsystem "touch PWNED"\nx' "${tiny[@]}"
expect_text "names the option" "--run holds a control character (byte 0x0a at position 1)"
one_line "the message is one line"
check "a newline in --name" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --name $'x\nsystem "touch PWNED"' --run s_name
expect_text "names --name" "--name holds a control character"
check "a newline in a grid value" 2 "$ctgrad" ablate gpt --grid $'lr=1e-3,2e-3\n' --run s_grid
expect_text "names --grid" "--grid holds a control character"
one_line "the grid's message is one line"
check "a newline in a fine-tuning's --task" 2 "$ctgrad" finetune bert --task $'austen-novel\n' --run ft_task
one_line "the task's message is one line"
check "a newline in a --set path" 2 "$ctgrad" train bert-finetune --set $'pretrained=x\nsystem "touch PWNED"' --run ft_set
expect_text "names the key" "config key 'pretrained' (--set) holds a control character"
check "bytes that are not UTF-8 in a config value" 2 "$ctgrad" train bert-finetune --set $'pretrained=\xff' --run ft_utf8
expect_text "says so" "is not UTF-8 text (byte 0xff at position 0)"
quoted="q'uote\"s \$(touch PWNED) \`touch PWNED\` ; system 'touch PWNED'"
check "a run folder named with quotes and shell syntax trains and plots" 0 "$ctgrad" train gpt --run "$quoted" "${tiny[@]}"
check "its loss plot is drawn" 0 test -s "$quoted/loss.png"
no_file "nothing ran" PWNED

# 2. Study sizes that wrap; errors of the runs' folders end as messages, not aborts.
v256=$(seq -s, 1 256)
check "8 keys x 256 values (2^64 configurations)" 2 "$ctgrad" ablate gpt --grid steps="$v256" --grid batch="$v256" --grid eval_every="$v256" \
  --grid sample_tokens="$(seq -s, 0 255)" --grid eval_windows="$(seq -s, 0 255)" --grid warmup="$(seq -s, 0 255)" --grid context="$(seq -s, 2 257)" \
  --grid beta2="$(seq -s, 0 255 | sed 's/\([0-9]*\)/0.\1/g')" --run s_huge --yes
expect_text "refuses past the cap" "more than 10000 configurations"
check "2^31 runs" 2 "$ctgrad" ablate gpt --grid steps="$v256" --grid batch="$v256" --grid eval_every="$v256" --grid warmup="$(seq -s, 0 127)" --run s_2e31
expect_text "refuses, counted right" "more than 10000 configurations (256 x 256 x 256 x 128)"
mkdir -p s_blocked/runs && echo x > s_blocked/runs/000_lr_1e-3
check "a run folder that is a file" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_blocked
expect_text "names it" "000_lr_1e-3/seed1"
check "no abort" 1 grep -q "terminate called" "$work/out.txt"

# 3. What a user saved is kept.
bert=(--set size=tiny --set steps=2 --set eval_every=2 --set batch=4 --set eval_sequences=4 --threads 1)
check "pretrain a tiny BERT" 0 "$ctgrad" train bert --run bx "${bert[@]}"
for run in bx bx/../bx "$work/bx"; do
  check "finetune bert into its pretrained run ($run) with --overwrite" 2 "$ctgrad" finetune bert --pretrained bx --run "$run" --overwrite --set size=tiny --set steps=2
  expect_text "refuses it" "is the folder --set pretrained names, which this run reads"
  check "the pretrained checkpoint is still there" 0 test -s bx/checkpoint.safetensors
done
t5=(--set size=tiny --set steps=2 --set eval_every=2 --set batch=4 --set eval_sequences=4 --threads 1)
check "pretrain a tiny T5" 0 "$ctgrad" train t5 --run t5x "${t5[@]}"
check "finetune t5 into its pretrained run with --overwrite" 2 "$ctgrad" finetune t5 --pretrained t5x --run t5x/. --overwrite --set size=tiny --set steps=2
check "the pretrained T5 is still there" 0 test -s t5x/checkpoint.safetensors
check "train keeping checkpoints" 0 "$ctgrad" train transformer --set task=copy --set steps=4 --set batch=4 --set eval_every=2 --set keep_checkpoints=2 --run kept --threads 1
cp kept/checkpoint.safetensors kept/mine.safetensors
check "average-checkpoints onto an existing file" 2 "$ctgrad" average-checkpoints transformer --run kept --last 2 --out mine.safetensors
expect_text "asks for --overwrite" "exists: add --overwrite"
check "the file is unchanged" 0 cmp kept/checkpoint.safetensors kept/mine.safetensors
check "with --overwrite" 0 "$ctgrad" average-checkpoints transformer --run kept --last 2 --out mine.safetensors --overwrite
expect_text "shows the command that reads it" "ctgrad eval transformer --run kept --checkpoint mine.safetensors"

# 4. Under an MPI launcher only train and finetune run.
for cmd in "ablate gpt --grid lr=1e-3 --run s_mpi" "average-checkpoints transformer --run kept" "eval transformer --run kept" "help"; do
  # shellcheck disable=SC2086
  check "under a launcher: $cmd" 2 env OMPI_COMM_WORLD_SIZE=2 "$ctgrad" $cmd
  expect_text "says only train and finetune" "(only train and finetune are data-parallel)"
done
no_file "no study was started" s_mpi
check "under a launcher, the refusal is one line" 2 env OMPI_COMM_WORLD_SIZE=2 "$ctgrad" eval transformer --run kept
one_line "one line, no MPI banner"
check "a bad CTGRAD_BUCKET_MB under a launcher" 2 env OMPI_COMM_WORLD_SIZE=2 CTGRAD_BUCKET_MB=junk "$ctgrad" train gpt --run mpi_x "${tiny[@]}"
expect_text "names it" "CTGRAD_BUCKET_MB"
one_line "in one line"

echo "my notes" > bx/notes.txt
check "export-batches onto an existing file" 2 "$ctgrad" export-batches bert --run bx --steps 1 --out bx/notes.txt
expect_text "asks for --overwrite" "exists: add --overwrite"
check "export-batches onto the run's checkpoint, with --overwrite" 2 "$ctgrad" export-batches bert --run bx --steps 1 --out bx/checkpoint.safetensors --overwrite
expect_text "refuses" "is a file of the run in bx, which it needs"
check "export-batches onto the run's tokenizer, with --overwrite" 2 "$ctgrad" export-batches bert --run bx --steps 1 --out bx/tokenizer.model --overwrite
expect_text "refuses" "is a file of the run in bx, which it needs"
check "the checkpoint is still there" 0 test -s bx/checkpoint.safetensors
check "export-batches into a missing folder, before the work" 2 "$ctgrad" export-batches bert --run bx --steps 1 --out nowhere/b.safetensors
check "average-checkpoints onto a hidden name (a temporary's)" 2 "$ctgrad" average-checkpoints transformer --run kept --last 2 --out .avg.tmp.999999.safetensors
mkdir -p bind_target
if mount --bind bx bind_target 2> /dev/null; then  # the same folder by another path (device and inode compared)
  check "finetune bert into a bind mount of its pretrained run" 2 "$ctgrad" finetune bert --pretrained bx --run bind_target --overwrite --set size=tiny --set steps=2
  check "the pretrained checkpoint survives" 0 test -s bx/checkpoint.safetensors
  umount bind_target
fi
"$ctgrad" train gpt --run locked "${tiny[@]}" --set steps=100000 --set eval_every=50 > locked.log 2>&1 &
lpid=$!
wait_for_rows locked/metrics.csv
check "a second train with --overwrite in a run folder that trains" 2 "$ctgrad" train gpt --run locked --overwrite "${tiny[@]}"
expect_text "names the holder" "is in use by another ctgrad train (pid $lpid)"
check "its metrics are kept" 0 test -s locked/metrics.jsonl
kill -TERM "$lpid"; wait "$lpid" 2>/dev/null

# 5. A study's runs die with it; a second study on the same folder is refused.
start_long_study s_kill kill.log
check "a second ablate on the folder" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${long[@]}" --run s_kill --threads 1
expect_text "names the holder" "is in use by another ctgrad ablate (pid $pid)"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
gone=0
for _ in $(seq 1 600); do
  pgrep -f -- "--run s_kill/runs" > /dev/null || { gone=1; break; }
  sleep 0.1
done
check "the run ended with the study" 0 test "$gone" -eq 1
check "and saved its checkpoint to go on from" 0 test -s s_kill/runs/000_lr_1e-3/seed1/checkpoint.safetensors

# 6. Failures found at the start, and in one line.
long_dir=$(printf 'd%.0s' $(seq 1 250))
long_path="$long_dir"
for _ in $(seq 1 15); do long_path="$long_path/$long_dir"; done  # 4,015 bytes: its files would pass PATH_MAX
check "a run folder whose files would not fit PATH_MAX" 2 "$ctgrad" train gpt --run "$long_path" "${tiny[@]}"
expect_text "says so before training" "past the system's limit of 4095"
check "a study" 0 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3 --seeds 1 "${tiny[@]}" --run s_bad
/usr/bin/python3 - s_bad/runs/001_lr_2e-3/seed1/result.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); r["final"]["loss"] = "oops"; json.dump(r, open(sys.argv[1], "w"))
PY
rm s_bad/results.md
check "a damaged result.json" 2 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3 --seeds 1 "${tiny[@]}" --run s_bad
expect_text "names the file and the key" "001_lr_2e-3/seed1/result.json: 'final.loss' is a string, not a number"
check "the report is written from the good runs" 0 test -s s_bad/results.md
check "sample t5 --fill past the context" 2 "$ctgrad" sample t5 --run t5x --fill "$(printf 'In the beginning God created the heaven and the earth. %.0s' {1..40}) <extra_id_0>"
expect_text "names the context" "longer than the context of"
check "a --name that is not UTF-8" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --name $'bad\xff' --run s_utf8
expect_text "says so" "--name is not UTF-8 text"
mkdir -p s_notes && echo notes > s_notes/study.json
check "a study.json that is not a study's" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_notes
expect_text "refuses the folder" "is not a study file ctgrad wrote"
check "a markup name" 0 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --name '<script>alert(1)</script>' --run s_markup
check "results.md holds no raw HTML" 1 grep -q "<script>" s_markup/results.md
/usr/bin/python3 - s_markup/runs/000_lr_1e-3/seed1/result.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); r["metric"] = "nosuch"; json.dump(r, open(sys.argv[1], "w"))
PY
check "a result naming a metric it lacks" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --name '<script>alert(1)</script>' --run s_markup
expect_text "names the key" "'metric' names 'nosuch', which 'final' lacks"
printf '{"steps": 1e400}' > big.json
check "a config number past double" 2 "$ctgrad" train gpt --config big.json --run cfg_x
check "no raw library tag" 1 grep -q "json.exception" "$work/out.txt"
check "CTGRAD_SIMD that is no ISA" 0 env CTGRAD_SIMD=$'ju\nnk' "$ctgrad" train gpt --run simd_x "${tiny[@]}"
expect_text "warns in one line" "CTGRAD_SIMD=ju?nk is not one of scalar, sse2, avx2, avx512"
check "--metric that no run reports" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --metric nosuch --run s_metric
expect_text "names what they report" "reports no validation metric 'nosuch' (it reports: loss)"
no_file "before any run" s_metric/runs
check "CTGRAD_GEMM_BLOCKS that is not a number" 0 env CTGRAD_GEMM_BLOCKS=abc "$ctgrad" train gpt --run blocks "${tiny[@]}"
expect_text "warns" "ignoring CTGRAD_GEMM_BLOCKS=abc"
check "help lists the exit codes" 0 "$ctgrad" help
expect_text "with the MPI watchdog's" "124"

# 8. A study with a failed run is incomplete: said, with the command that retries it.
check "a study with a diverging run" 1 "$ctgrad" ablate gpt --grid init_std=0.02,1e30 --seeds 1 "${tiny[@]}" --run s_fail
expect_text "says how to retry" "--retry-failed"
check "the same command again" 1 "$ctgrad" ablate gpt --grid init_std=0.02,1e30 --seeds 1 "${tiny[@]}" --run s_fail
expect_text "still incomplete" "the study is incomplete: 1 of 2 runs failed"
check "help documents --retry-failed" 0 "$ctgrad" help
expect_text "it" "--retry-failed"

# 9. A preset brings defaults that fit it.
check "train gpt --set size=tiny alone" 0 "$ctgrad" train gpt --run gpt_tiny --set size=tiny --set steps=1 --set eval_windows=2 --set sample_tokens=0 --threads 1
check "train bert --set size=tiny alone" 0 "$ctgrad" train bert --run bert_tiny --set size=tiny --set steps=1 --set eval_sequences=4 --threads 1

# 10. A study continues only its own runs.
check "a study to meddle with" 0 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_own
rm s_own/runs/000_lr_1e-3/seed1/result.json
check "a user's own training in a study's run folder" 0 "$ctgrad" train gpt --run s_own/runs/000_lr_1e-3/seed1 --overwrite "${tiny[@]}" --set steps=4
cp s_own/runs/000_lr_1e-3/seed1/checkpoint.safetensors mine_own.safetensors
check "the study again" 1 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_own
expect_text "refuses to take it as the study's run" "is not this study's run: it was trained with steps 4, not 2"
check "failed.json says why" 0 grep -q "is not this study's run" s_own/runs/000_lr_1e-3/seed1/failed.json
check "with --retry-failed" 1 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_own --retry-failed
expect_text "refuses again" "is not this study's run"
check "the user's checkpoint is kept" 0 cmp mine_own.safetensors s_own/runs/000_lr_1e-3/seed1/checkpoint.safetensors
check "no result is reported for it" 1 test -e s_own/runs/000_lr_1e-3/seed1/result.json
start_long_study s_term term.log
kill -TERM "$pid"
wait "$pid"
check "a study stopped by SIGTERM exits 130" 0 test $? -eq 130
check "its last progress line counts the stopped run as left" 0 grep -q "0 done, 0 running, 1 left" <(tr '\r' '\n' < term.log | grep '^study' | tail -n 1)
printf '{"final": {"loss": NaN}, "metric": "loss"}' > s_bad/runs/001_lr_2e-3/seed1/result.json
check "a result.json holding NaN" 2 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3 --seeds 1 "${tiny[@]}" --run s_bad
expect_text "names what the parser found" "result.json is not JSON (parse error at line 1"
printf '{"final": {"loss": 1e999}, "metric": "loss"}' > s_bad/runs/001_lr_2e-3/seed1/result.json
check "a result.json holding 1e999" 2 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3 --seeds 1 "${tiny[@]}" --run s_bad
expect_text "says the number overflows" "number overflow"
printf '[1]' > s_bad/runs/001_lr_2e-3/seed1/result.json
check "a result.json that is an array" 2 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3 --seeds 1 "${tiny[@]}" --run s_bad
expect_text "says so" "result.json holds a JSON array, not an object"
check "a study name with a Markdown link" 0 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --name '[x](javascript:alert(1))' --run s_link
check "results.md holds no live link" 1 grep -qF "](javascript" s_link/results.md

# 11. Locks are per folder; hidden --out names; C1 controls.
cp -al s_link s_copy
check "a study folder copied with cp -al" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --name '[x](javascript:alert(1))' --run s_copy
expect_text "says the lock file is shared" "names (a hard link, as cp -al makes)"
mkdir -p linked && echo "my notes" > notes.txt && ln notes.txt linked/.ctgrad.lock
check "a run folder whose lock file is a user's file" 2 "$ctgrad" train gpt --run linked "${tiny[@]}"
check "the user's file is kept" 0 grep -qx "my notes" notes.txt
check "export-batches onto a hidden name (a temporary's)" 2 "$ctgrad" export-batches bert --run bx --steps 1 --out bx/.b.safetensors.tmp.1
expect_text "says why" "a hidden name (a leading '.') is kept for ctgrad's temporary files"
check "a C1 control (CSI) in --run" 2 "$ctgrad" train gpt --run $'r\xc2\x9b2J' "${tiny[@]}"
expect_text "names it" "--run holds a control character (U+009B at position 1)"
check "a raw 0x9b byte in a path" 2 "$ctgrad" eval gpt --run $'nowhere\x9b2J'
expect_text "is refused as not UTF-8" "--run is not UTF-8 text (byte 0x9b at position 7)"
check "reaches the terminal as text" 1 env LC_ALL=C grep -q $'\x9b' "$work/out.txt"
check "a raw 0x9b byte in a run folder to train" 2 "$ctgrad" train gpt --run $'r\x9b2Jx' "${tiny[@]}"
check "an escape sequence in --attention-png" 2 "$ctgrad" eval transformer --run kept --attention-png $'q\e[31mRED'
expect_text "names the option" "--attention-png holds a control character (byte 0x1b at position 1)"
check "a C1 control in an environment variable's warning" 0 env CTGRAD_SIMD=$'\xc2\x9b2J' CTGRAD_GEMM_BLOCKS=$'\x9b' "$ctgrad" train gpt --run simd_c1 "${tiny[@]}"
expect_text "in the warning" "CTGRAD_SIMD=?2J is not one of"
check "is shown as ?" 1 env LC_ALL=C grep -qP '\xc2\x9b|\x9b' "$work/out.txt"

# 12. Plug-ins that are cut short, unstamped, foreign or another's: named, never a crash.
plugins=$(dirname "$ctgrad")/plugins
mkdir -p pbin/plugins && cp "$ctgrad" pbin/ctgrad
head -c 100000 "$plugins/ctgrad-vit.so" > pbin/plugins/ctgrad-vit.so && cp "$plugins/ctgrad-vit.so.stamp" pbin/plugins/
cp "$plugins/ctgrad-t5.so" pbin/plugins/  # no stamp
cp "$plugins/ctgrad-transformer.so" pbin/plugins/ && mkdir pbin/plugins/ctgrad-transformer.so.stamp
libm=$(ldd "$ctgrad" | awk '/libm\.so/ {print $3}')
cp "$libm" pbin/plugins/ctgrad-bert.so && cp "$plugins/ctgrad-bert.so.stamp" pbin/plugins/
cp "$plugins/ctgrad-transformer.so" pbin/plugins/ctgrad-llama.so && cp "$plugins/ctgrad-llama.so.stamp" pbin/plugins/
check "help beside damaged plug-ins" 0 pbin/ctgrad help
expect_text "a cut file" "ctgrad-vit.so was not loaded: it is cut short"
expect_text "no stamp" "ctgrad-t5.so was not loaded: it has no stamp ctgrad-t5.so.stamp"
expect_text "a stamp that is a folder" "ctgrad-transformer.so was not loaded: its stamp ctgrad-transformer.so.stamp is not a regular file"
expect_text "another library" "ctgrad-bert.so was not loaded: its bytes are not the ones its build wrote"
expect_text "another plug-in's file" "ctgrad-llama.so was not loaded: its bytes are not the ones its build wrote"
check "no model is listed from a plug-in that failed" 1 grep -qE "^  (transformer|vit|bert|t5|llama) " "$work/out.txt"
check "train vit beside a cut plug-in" 2 pbin/ctgrad train vit --run v_x
expect_text "says why" "cut short"
check "a GPT of another architecture needs no plug-in" 0 pbin/ctgrad train gpt --run var_x "${tiny[@]}" --set norm_kind=rms
stamp_tool=$(dirname "$ctgrad")/ctgrad-plugin-stamp
header=$(dirname "$ctgrad")/generated/git_commit.h
mkdir -p pbin2/plugins && cp "$ctgrad" pbin2/ctgrad
cp "$plugins/ctgrad-vit.so" "$plugins/ctgrad-vit.so.stamp" pbin2/plugins/
dd if=/dev/zero of=pbin2/plugins/ctgrad-vit.so bs=4096 seek=40 count=16 conv=notrunc status=none  # code zeroed, headers whole
check "help beside a plug-in whose code is damaged" 0 pbin2/ctgrad help
expect_text "names it" "ctgrad-vit.so was not loaded: its bytes are not the ones its build wrote"
commit=$(sed -n 's/.*"\(.*\)".*/\1/p' "$header")
if [ -n "$commit" ]; then  # a plug-in of another source state, stamped as if it were this one's
  cp "$plugins/ctgrad-llama.so" pbin2/plugins/
  /usr/bin/python3 -c "import sys; p, c = sys.argv[1], sys.argv[2].encode(); b = open(p, 'rb').read(); open(p, 'wb').write(b.replace(c + b'\0', b'0' * len(c) + b'\0'))" \
    pbin2/plugins/ctgrad-llama.so "$commit"
  "$stamp_tool" "$header" pbin2/plugins/ctgrad-llama.so pbin2/plugins/ctgrad-llama.so.stamp
  check "help beside a plug-in of another source state" 0 pbin2/ctgrad help
  expect_text "names it" "ctgrad-llama.so was not loaded: it was built from another state of the source"
  check "its model is not used" 2 pbin2/ctgrad train llama --run var_y "${tiny[@]}"
  expect_text "says why" "ctgrad-llama.so was not loaded"
fi
cp "$(ldd "$ctgrad" | awk '/libm\.so/ {print $3}')" pbin2/plugins/ctgrad-bert.so
"$stamp_tool" "$header" pbin2/plugins/ctgrad-bert.so pbin2/plugins/ctgrad-bert.so.stamp
cp "$plugins/ctgrad-transformer.so" pbin2/plugins/ctgrad-t5.so
"$stamp_tool" "$header" pbin2/plugins/ctgrad-t5.so pbin2/plugins/ctgrad-t5.so.stamp
check "help beside a foreign library and another plug-in's file, both stamped" 0 pbin2/ctgrad help
expect_text "the library" "ctgrad-bert.so was not loaded: it is not a ctgrad plug-in"
expect_text "the other plug-in" "ctgrad-t5.so was not loaded: it holds the models transformer, not t5, t5-finetune"
check "no model from them is listed" 1 grep -qE "^  (transformer|bert|t5) " "$work/out.txt"

# 13. A study reports only its own results; its files are read with care.
check "a study for the checks below" 0 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3 --seeds 1 "${tiny[@]}" --run s_mix
check "a user's training over a finished run" 0 "$ctgrad" train gpt --run s_mix/runs/001_lr_2e-3/seed1 --overwrite "${tiny[@]}" --set lr=5e-3
check "the study again" 2 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3 --seeds 1 "${tiny[@]}" --run s_mix
expect_text "names the run trained again" "001_lr_2e-3/seed1/result.json: the run's metrics.jsonl no longer ends with this result"
check "and leaves it out of the report" 0 /usr/bin/python3 -c "import json, sys; sys.exit(json.load(open('s_mix/results.json'))['configurations'][1]['seeds'] != 0)"
check "a study with other fixed settings" 0 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3 --seeds 1 "${tiny[@]}" --set warmup=1 --run s_other
rm -rf s_other/runs/001_lr_2e-3/seed1 && cp -r s_link/runs/000_lr_1e-3/seed1 s_other/runs/001_lr_2e-3/
check "a run copied from another study" 2 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3 --seeds 1 "${tiny[@]}" --set warmup=1 --run s_other
expect_text "is not this run's" "001_lr_2e-3/seed1/result.json is not this run's result"
check "a study whose run.json is damaged" 0 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_info
echo '{"parameters": 18446744073709551615}' > s_info/runs/000_lr_1e-3/seed1/run.json
check "a parameter count past 2^63" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_info
expect_text "named" "run.json: 'parameters' is not a count"
/usr/bin/python3 - s_info/runs/000_lr_1e-3/seed1 <<'PY'
import json, sys
d = sys.argv[1]; json.dump({"parameters": 1}, open(d + "/run.json", "w"))
r = json.load(open(d + "/result.json")); r["train_seconds"] = 1e308; json.dump(r, open(d + "/result.json", "w"))
PY
check "a training time of 1e308 s" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_info
expect_text "named" "'train_seconds' is not a duration"
printf '{"final": {"loss": [1]}, "metric": "loss"}' > s_info/runs/000_lr_1e-3/seed1/result.json
check "a final that is an array" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_info
expect_text "in words" "'final.loss' is an array, not a number"
check "a study whose metrics.jsonl becomes a FIFO" 0 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_fifo
rm s_fifo/runs/000_lr_1e-3/seed1/metrics.jsonl && mkfifo s_fifo/runs/000_lr_1e-3/seed1/metrics.jsonl
check "the study again: no hang" 2 timeout -k 5 120 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_fifo
entry=$(ls "$CTGRAD_CACHE"/janeaustenr-novels-* 2> /dev/null | head -n 1)
if [ -n "$entry" ]; then
  rm "$entry" && mkfifo "$entry"
  check "a FIFO in the data cache: no hang" 0 timeout -k 5 300 "$ctgrad" train bert --run b_fifo "${bert[@]}"
  expect_text "it is made again" "is not a regular file: removed, and its data made again"
fi

# 14. The fourth probe: the run's files whatever --checkpoint says, inputs linked into the run,
# the heatmaps' files, escape sequences in --out and in the cache's folder, fixed settings' order.
cp bx/checkpoint.safetensors ck_outside.safetensors
for f in checkpoint.safetensors tokenizer.model metrics.jsonl; do
  check "export-batches --checkpoint elsewhere --out bx/$f --overwrite" 2 "$ctgrad" export-batches bert --run bx --checkpoint "$work/ck_outside.safetensors" --steps 1 --out bx/$f --overwrite
  expect_text "refuses" "is a file of the run in bx, which it needs"
done
check "the run still evaluates" 0 "$ctgrad" eval bert --run bx --threads 1
mkdir -p pre_links && ln -s ../bx/checkpoint.safetensors pre_links/ && ln -s ../bx/tokenizer.model pre_links/
check "finetune into a run whose files the pretrained folder links to" 2 "$ctgrad" finetune bert --pretrained pre_links --run bx --overwrite --set size=tiny --set steps=2
expect_text "refuses" "reads through a link"
check "the run's checkpoint is kept" 0 test -s bx/checkpoint.safetensors
check "export-batches --out with an escape sequence" 2 "$ctgrad" export-batches bert --run bx --steps 1 --out $'x\e]0;TITLE\ay'
expect_text "names the option" "--out holds a control character"
check "a CTGRAD_CACHE with an escape sequence" 2 env CTGRAD_CACHE=$'/tmp/c\e[2J' "$ctgrad" train gpt --run cache_esc "${tiny[@]}"
expect_text "names the variable" "CTGRAD_CACHE holds a control character"
check "a study" 0 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 --set warmup=1 "${tiny[@]}" --run s_order
check "the same study, its fixed settings in another order" 0 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --set warmup=1 --run s_order
check "a tiny translation run" 0 "$ctgrad" train transformer --run trt --set steps=1 --set batch=2 --set eval_every=1 --set eval_sentences=2 \
  --set train_fraction=0.01 --set vocab=4000 --threads 1
mkdir -p att && mkfifo att/enc_0.dat && echo precious > precious.txt && ln -s ../precious.txt att/cross_0.dat
check "attention heatmaps beside a FIFO and a link: no hang" 0 timeout -k 5 300 "$ctgrad" eval transformer --run trt --set eval_sentences=1 --attention-png att --threads 1
check "the linked file is kept" 0 grep -qx precious precious.txt
check "the PNGs are drawn" 0 test -s att/cross_layer0.png
check "the same again: the PNGs there are kept" 2 "$ctgrad" eval transformer --run trt --set eval_sentences=1 --attention-png att --threads 1
expect_text "says so" "already holds enc_layer0.png"

long_text=$(printf 'The house is big and the garden is green. %.0s' {1..12})
check "translate a text past max_len" 0 "$ctgrad" translate transformer --run trt --beam 1 --threads 1 --text "$long_text I love you."
expect_text "says it is cut" "more than the model reads (max_len"

# 15. The fifth probe: a study run's train.log, ViT's side files, duplicate kept checkpoints.
mkdir -p s_log/runs/000_lr_1e-3/seed1 && mkfifo s_log/runs/000_lr_1e-3/seed1/train.log
check "a study whose run's train.log is a FIFO: no hang" 1 timeout -k 5 120 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_log
expect_text "names it" "train.log: it is not a regular file (a FIFO)"
mkdir -p s_log2/runs/000_lr_1e-3/seed1 && echo "my notes" > notes2.txt && ln -s "$work/notes2.txt" s_log2/runs/000_lr_1e-3/seed1/train.log
check "a study whose run's train.log links to a user's file" 1 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_log2
check "the user's file is kept" 0 test "$(cat notes2.txt)" = "my notes"
check "a tiny ViT" 0 "$ctgrad" train vit --run v1 --set size=tiny --set epochs=1 --set train_images=64 --set batch=32 --threads 1
echo precious > precious_v.txt && ln -s "$work/precious_v.txt" v1/predictions.png.dat && mkfifo v1/.plot-data.fifo
check "eval vit beside a linked predictions.png.dat" 0 timeout -k 5 120 "$ctgrad" eval vit --run v1 --threads 1
check "the linked file is kept" 0 grep -qx precious precious_v.txt
rm v1/epochs.jsonl && mkfifo v1/epochs.jsonl
check "train vit --resume with epochs.jsonl a FIFO: no hang" 0 timeout -k 5 120 "$ctgrad" train vit --run v1 --resume --set size=tiny --set epochs=2 \
  --set train_images=64 --set batch=32 --threads 1
expect_text "warns" "epochs.jsonl: it is not a regular file (a FIFO)"
kept_one=$(ls kept/checkpoint-*.safetensors | tail -n 1)
step=$(basename "$kept_one" .safetensors | sed 's/checkpoint-0*//')
cp "$kept_one" "kept/checkpoint-$step.safetensors"
check "average-checkpoints with one step kept twice" 2 "$ctgrad" average-checkpoints transformer --run kept --last 2 --out avg2.safetensors
expect_text "names it" "holds two kept checkpoints of step $step"
rm "kept/checkpoint-$step.safetensors"

# 16. The sixth probe: Ctrl-C at translate's prompt, a user's run.json and hidden files, the
# references export-batches writes, hard links of the files a study or a ViT appends to.
mkfifo tr_in
{ echo "I love you."; sleep 120; } > tr_in &
feeder=$!
"$ctgrad" translate transformer --run trt --beam 1 --batch 1 --threads 1 < tr_in > tr_out.txt 2> tr_err.txt &
tpid=$!
for _ in $(seq 1 1200); do [ -s tr_out.txt ] && break; sleep 0.05; done
check "translate has translated its first line" 0 test -s tr_out.txt
kill -INT "$tpid"
for _ in $(seq 1 200); do kill -0 "$tpid" 2>/dev/null || break; sleep 0.05; done
check "Ctrl-C while translate waits for the next line ends it" 1 kill -0 "$tpid"
kill -KILL "$tpid" "$feeder" 2>/dev/null
wait "$tpid" "$feeder" 2>/dev/null
mkdir r_json && echo '{"mine": 1}' > r_json/run.json
check "a new run in a folder holding a user's run.json" 2 "$ctgrad" train gpt --run r_json "${tiny[@]}"
expect_text "names it" "holds files of a run without a checkpoint (run.json)"
check "the user's run.json is kept" 0 grep -q mine r_json/run.json
mkdir -p r_jdir/run.json
check "a new run in a folder holding a folder run.json" 2 "$ctgrad" train gpt --run r_jdir --overwrite "${tiny[@]}"
expect_text "says so before training" "holds a folder run.json where the run writes a file"
mkdir r_notes && echo notes > r_notes/.notes.tmp.2024-05-01
check "a run beside a user's hidden file that looks like a temporary" 0 "$ctgrad" train gpt --run r_notes "${tiny[@]}"
check "the user's file is kept" 0 test -s r_notes/.notes.tmp.2024-05-01
echo mine > eb.safetensors.test.de
check "export-batches transformer beside a user's .test.de" 2 "$ctgrad" export-batches transformer --run trt --steps 1 --out eb.safetensors --threads 1
expect_text "names the references' file" "eb.safetensors.test.de exists: add --overwrite"
check "the user's file is kept" 0 grep -qx mine eb.safetensors.test.de
no_file "nothing was exported" eb.safetensors
mkdir -p s_hl/runs/000_lr_1e-3/seed1 && echo notes > notes3.txt && ln notes3.txt s_hl/runs/000_lr_1e-3/seed1/train.log
check "a study whose run's train.log is a hard link of a user's file" 1 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_hl
expect_text "names it" "train.log: it is a hard link of another file"
check "the user's file is kept" 0 test "$(cat notes3.txt)" = notes
rm -f v1/epochs.jsonl && echo precious > precious_e.txt && ln precious_e.txt v1/epochs.jsonl
check "train vit --resume with epochs.jsonl a hard link of a user's file" 0 "$ctgrad" train vit --run v1 --resume --set size=tiny --set epochs=3 \
  --set train_images=64 --set batch=32 --threads 1
expect_text "warns" "epochs.jsonl: it is a hard link of another file"
check "the user's file is kept" 0 grep -qx precious precious_e.txt

# 17. The seventh probe: only a run's own temporaries are removed, and only in a run's folder;
# exact tokenizer names; translate's line numbers and read errors; a pretrained FIFO; a kept
# checkpoint under another step's name; an integer's bound said as a number.
mkdir home1 && echo draft > home1/.thesis.tmp.20240501 && echo d > home1/.b.tmp.424242.1
check "eval on a folder without a run" 2 "$ctgrad" eval gpt --run home1 --threads 1
check "the user's hidden files are kept" 0 test -s home1/.thesis.tmp.20240501 -a -s home1/.b.tmp.424242.1
mkdir proj && echo d > proj/.draft.tmp.20240501.1 && echo d > proj/.notes.md.tmp.300.1
check "a new run beside them" 0 "$ctgrad" train gpt --run proj "${tiny[@]}"
check "they are kept" 0 test -s proj/.draft.tmp.20240501.1 -a -s proj/.notes.md.tmp.300.1
cp proj/tokenizer.json proj/tokenizer.json.bak && echo n > proj/tokenizer.notes.txt
check "the run again with --overwrite" 0 "$ctgrad" train gpt --run proj --overwrite "${tiny[@]}"
check "the user's tokenizer backup and notes are kept" 0 test -s proj/tokenizer.json.bak -a -s proj/tokenizer.notes.txt
mkdir notes_only && echo mine > notes_only/tokenizer.notes.txt
check "a new run in a folder holding a user's tokenizer.notes.txt" 0 "$ctgrad" train gpt --run notes_only "${tiny[@]}"
{ for i in $(seq 1 34); do echo "the house is big"; done; printf 'house %.0s' {1..200}; echo; } > l35.txt
check "translate a long 35th line" 0 "$ctgrad" translate transformer --run trt --beam 1 --batch 32 --threads 1 < l35.txt
expect_text "names the input's line" "line 35 is"
check "translate with a folder as standard input" 1 "$ctgrad" translate transformer --run trt --beam 1 --threads 1 < /tmp
expect_text "says so" "cannot read standard input"
cp -r bx bx_fifo && rm bx_fifo/tokenizer.model && mkfifo bx_fifo/tokenizer.model
check "finetune from a pretrained run whose tokenizer is a FIFO" 2 timeout -k 5 120 "$ctgrad" finetune bert --pretrained bx_fifo --run ft_fifo --set size=tiny --set steps=2
expect_text "says what it is" "is not a regular file"
cp "$(ls kept/checkpoint-*.safetensors | head -n 1)" kept/checkpoint-99999999.safetensors
check "average-checkpoints with a checkpoint under another step's name" 2 "$ctgrad" average-checkpoints transformer --run kept --last 2 --out avg3.safetensors
expect_text "names it" "not of step 99999999 its name says"
rm kept/checkpoint-99999999.safetensors
check "a seed past 2^63" 2 "$ctgrad" train gpt --run seed_big --set seed=18446744073709551615 "${tiny[@]}"
expect_text "says the bound" "[0, 9223372036854775807]"

# 18. The eighth probe: a folder named with --run but read through --checkpoint elsewhere is not
# a run's; a failed write to standard output fails the command; links named; a pretrained file;
# a study's own temporaries; a folder run.json on resume.
dead=$(for p in $(seq 30000 -1 300); do [ -e /proc/$p ] || { echo $p; break; }; done)
mkdir mine && echo important > "mine/.weights.safetensors.tmp.$dead.0" && echo important > "mine/.result.json.tmp.$dead.2"
check "eval of another folder's checkpoint with --run naming a user's folder" 2 "$ctgrad" eval gpt --run mine --checkpoint proj/checkpoint.safetensors --threads 1
check "the user's files there are kept" 0 test -s "mine/.weights.safetensors.tmp.$dead.0" -a -s "mine/.result.json.tmp.$dead.2"
check "help into a full disk" 1 bash -c "'$ctgrad' help gpt > /dev/full"
expect_text "says so" "cannot write standard output"
check "eval with standard output closed" 1 bash -c "'$ctgrad' eval gpt --run proj --threads 1 --set eval_windows=4 >&-"
rm -f proj/loss.png && ln -s "$work/precious_v.txt" proj/loss.png
check "a resumed run whose loss.png is a link" 0 "$ctgrad" train gpt --run proj --resume "${tiny[@]}" --set steps=4
expect_text "names it as a link" "loss.png is a symbolic link: not drawn"
cp "$work/out.txt" "$work/linked_plot.txt"
check "the done line does not announce the plot" 1 grep -q ", plot " "$work/linked_plot.txt"
check "the linked file is kept" 0 grep -qx precious precious_v.txt
check "finetune from a pretrained file, not a folder" 2 "$ctgrad" finetune bert --pretrained bx/checkpoint.safetensors --run ft_file --set size=tiny --set steps=2
expect_text "says so" "is a file, not a run folder"
check "a study" 0 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_tmp
echo half > "s_tmp/.results.md.tmp.$dead.0"
check "the study again beside a killed study's temporary" 0 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run s_tmp
no_file "the study's temporary is removed" "s_tmp/.results.md.tmp.$dead.0"
cp -r proj proj_rj && rm -f proj_rj/run.json && mkdir proj_rj/run.json
check "resume with a folder run.json" 2 "$ctgrad" train gpt --run proj_rj --resume "${tiny[@]}" --set steps=6
expect_text "says so up front" "holds a folder run.json where the run writes a file"

# 19. The ninth probe: standard descriptors closed by the caller; a study folder of a user's;
# a folder run.json for a read-only command.
check "train with standard output and error closed" 1 env CTGRAD_GEMM_BLOCKS=abc bash -c "'$ctgrad' train gpt --run fds ${tiny[*]} >&- 2>&-"
check "metrics.jsonl holds only records" 0 /usr/bin/python3 -c "import json,sys; [json.loads(l) for l in open('fds/metrics.jsonl')]"
check "the lock file holds only its holder's numbers" 1 grep -qv '^[0-9]*$' fds/.ctgrad.lock
mkdir udocs && echo mine > udocs/thesis.tex && echo draft > "udocs/.results.md.tmp.$dead.0"
check "ablate on a user's folder" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run udocs
check "its hidden file is kept" 0 test -s "udocs/.results.md.tmp.$dead.0"
cp -r proj proj_ro && rm -rf proj_ro/run.json && mkdir proj_ro/run.json
check "eval of a run whose run.json is a folder" 0 "$ctgrad" eval gpt --run proj_ro --threads 1 --set eval_windows=4

# 20. The tenth probe: ctgrad-bleu's input and output; a user's file named like a lock; options
# of one value given twice to ablate.
bleu="$(dirname "$ctgrad")/ctgrad-bleu"
printf 'the cat sat on the mat\n' > hyp.txt
check "ctgrad-bleu into a full disk" 1 bash -c "'$bleu' hyp.txt hyp.txt > /dev/full"
expect_text "says so" "cannot write standard output"
check "ctgrad-bleu with a folder as references" 1 "$bleu" hyp.txt /tmp
expect_text "names it" "cannot read /tmp: Is a directory"
check "ctgrad-bleu --tokenize of a folder" 1 bash -c "'$bleu' --tokenize < /tmp"
mkdir u_lock && echo "my notes" > u_lock/study.lock
check "ablate in a folder whose study.lock is a user's file" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --run u_lock
expect_text "names it" "holds something other than a pid"
check "the user's file is kept" 0 grep -qx "my notes" u_lock/study.lock
check "ablate with --seeds twice" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 --seeds 2 "${tiny[@]}" --run s_twice
expect_text "says so" "--seeds is given twice"
check "ablate with a key set twice" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --seeds 1 "${tiny[@]}" --set steps=4 --run s_twice
expect_text "says so" "'steps' is set twice with --set"

no_file "nothing ran anywhere" PWNED
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
