#!/usr/bin/env bash
# A user's own text through the command (docs/training.md, "Your data"): a folder of files, JSON
# Lines, gzip and zstd, validation held out by hash or given; train, resume, eval on other text,
# sample; `ctgrad data tokenize` into shards, resumed after an interruption to the same bytes,
# and training on the shards. Then every bad input of the readers, each refused in one line
# naming the file and where, with nothing written.
set -u
source "$(dirname "$0")/checks.sh"  # check, expect_text
ctgrad=$(realpath "$1")
images=$([ -n "${2:-}" ] && realpath "$2" || echo "")  # tests/data/make_images.cpp: synthetic image folders
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export CTGRAD_CACHE="$work/cache"
one_line() {
  if [ "$(wc -l < "$work/out.txt")" -le 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: more than one line:"; cat "$work/out.txt"; fi
}
tiny=(--set size=tiny --set steps=20 --set eval_every=10 --set batch=4 --set context=32 --set sample_tokens=20 --threads 1)

# A corpus of 60 short documents in a folder tree, two of them compressed, one hidden.
mkdir -p notes/a notes/b
for i in $(seq 1 60); do
  sub=$([ $((i % 2)) -eq 0 ] && echo a || echo b)
  for j in $(seq 1 12); do echo "note $i line $j: the quick brown fox jumps over the lazy dog $((i * j))"; done > "notes/$sub/n$i.md"
done
gzip notes/a/n2.md
if command -v zstd > /dev/null; then zstd -q --rm notes/a/n4.md; fi
echo "never read" > notes/.draft.txt
printf '{"text": "first record of the jsonl file with some words in it"}\n{"text": "second record, other words", "id": 2}\n' > records.jsonl
for i in $(seq 1 40); do echo "{\"body\": \"record $i: $(printf 'word%.0s ' $(seq 1 $i))\"}"; done > body.jsonl

# 1. A folder: trained, resumed, evaluated on other text, sampled (llama when built, else gpt).
model=llama
"$ctgrad" help llama > /dev/null 2>&1 || model=gpt
check "train $model on a folder" 0 "$ctgrad" train $model --run r1 --set data=notes "${tiny[@]}"
expect_text "counts the documents held out by hash" "of 60 documents held out by hash"
expect_text "trains" "step 20/20"
expect_text "samples from the validation text" "sample (temperature"
check "resume to 30 steps" 0 "$ctgrad" train $model --run r1 --set data=notes "${tiny[@]}" --set steps=30 --resume
expect_text "resumed" "step 30/30"
check "resume with other data is refused" 2 "$ctgrad" train $model --run r1 --set data=records.jsonl "${tiny[@]}" --set steps=40 --resume
expect_text "names the key" "data"
check "eval on other text (a JSON Lines file, unseen characters)" 0 "$ctgrad" eval $model --run r1 --set data=body.jsonl --set text_field=body --set span_documents=true
expect_text "a validation loss" "validation loss"
check "sample" 0 "$ctgrad" sample $model --run r1 --prompt "note 7 line" --tokens 10
check "train gpt on one file with val_data, BPE" 0 "$ctgrad" train gpt --run r2 --set data=notes/b/n1.md --set val_data=notes/b/n3.md --set tokenizer=bpe --set vocab=128 "${tiny[@]}" --set context=8
expect_text "validation from the file given" "validation from notes/b/n3.md"
check "one file alone: its tail held out" 0 "$ctgrad" train gpt --run r3 --set data=notes/b/n1.md "${tiny[@]}" --set context=8
expect_text "says how" "the last 10% of the document held out"
check "short documents: span_documents joins them" 2 "$ctgrad" train gpt --run r4 --set data=records.jsonl "${tiny[@]}" --set context=64
expect_text "says which key" "span_documents=true"
check "the saved config states the data" 0 grep -qa 'data\\":\\"notes' r1/checkpoint.safetensors
check "a KJV run's config does not name the data keys" 0 "$ctgrad" train gpt --run r5 "${tiny[@]}" --set steps=2 --set eval_every=2 --set eval_windows=2 --set sample_tokens=0
check "(no data key in it: the bytes of before)" 1 grep -qa 'data\\":' r5/checkpoint.safetensors

# 2. Token shards: written, resumed after an interruption to the same bytes, trained on.
check "tokenize" 0 "$ctgrad" data tokenize --data notes --out shards --vocab 96 --val-fraction 0.2 --shard-tokens 3000
expect_text "reports throughput" "MB/s"
check "several shards" 0 test -f shards/train_000002.bin
cp -r shards whole
# An interruption after the second training shard: later shards gone, the manifest unfinished.
rm -f shards/train_00000[2-9].bin shards/val_*.bin
sed -i 's/"complete": true/"complete": false/' shards/tokenize.json
check "training refuses an unfinished tokenization" 2 "$ctgrad" train gpt --run r6 --set data=shards "${tiny[@]}"
expect_text "says how to finish" "run the same ctgrad data tokenize again"
check "the same command resumes" 0 "$ctgrad" data tokenize --data notes --out shards --vocab 96 --val-fraction 0.2 --shard-tokens 3000
expect_text "resumes" "resuming"
for f in whole/*.bin; do check "$(basename "$f") identical after resuming" 0 cmp "$f" "shards/$(basename "$f")"; done
check "again: nothing to do" 0 "$ctgrad" data tokenize --data notes --out shards --vocab 96 --val-fraction 0.2 --shard-tokens 3000
expect_text "says so" "nothing to do"
check "other settings into the same folder are refused" 2 "$ctgrad" data tokenize --data notes --out shards --vocab 96 --val-fraction 0.3
expect_text "says how" "--overwrite"
check "train on the shards (their tokenizer's kind by default)" 0 "$ctgrad" train gpt --run r6 --set data=shards "${tiny[@]}"
expect_text "reads the shards" "validation shards"
check "resume on the shards" 0 "$ctgrad" train gpt --run r6 --set data=shards "${tiny[@]}" --set steps=30 --resume
check "a tokenizer of the other kind is refused" 2 "$ctgrad" train gpt --run r8 --set data=shards --set tokenizer=char "${tiny[@]}"
expect_text "says which" "--set tokenizer=bpe"
check "the run keeps the shards' tokenizer" 0 cmp r6/tokenizer.model shards/tokenizer.model
check "a run's tokenizer tokenizes other text" 0 "$ctgrad" data tokenize --data records.jsonl --out shards2 --tokenizer r6 --val-fraction 0.5
check "character shards" 0 "$ctgrad" data tokenize --data notes --out shards3 --chars --val-fraction 0.2
check "train on character shards" 0 "$ctgrad" train gpt --run r7 --set data=shards3 "${tiny[@]}"

# 3. Sentence pairs for translation (transformer, seq2seq): TSV, JSON Lines, two line-aligned files.
# 400 pairs of made-up words (a vocabulary of 256 pieces needs that variety), each word's "German" its reverse.
awk 'BEGIN { srand(7); for (i = 0; i < 400; i++) { en = "the"; de = "das";
  for (w = 0; w < 4; w++) { word = ""; n = 3 + int(rand() * 5); for (k = 0; k < n; k++) word = word sprintf("%c", 97 + int(rand() * 26));
    rev = ""; for (k = length(word); k > 0; k--) rev = rev substr(word, k, 1); en = en " " word; de = de " " rev }
  print en "\t" de > "pairs.tsv"; print en > "en.txt"; print de > "de.txt";
  printf "{\"translation\": {\"en\": \"%s\", \"de\": \"%s\"}}\n", en, de > "pairs.jsonl" } }'
if "$ctgrad" help transformer > /dev/null 2>&1; then
  small=(--set d_model=32 --set layers=1 --set heads=2 --set vocab=256 --set batch=16 --set steps=6 --set eval_every=3 --set eval_sentences=8 --set beam=1 --threads 1)
  check "translate a TSV file" 0 "$ctgrad" train transformer --run t1 --set data=pairs.tsv "${small[@]}"
  expect_text "trains on the pairs" "step 6/6"
  check "eval: BLEU on its test pairs" 0 "$ctgrad" eval transformer --run t1 --set eval_sentences=8 --set beam=1
  expect_text "BLEU" "BLEU"
  check "two line-aligned files" 0 "$ctgrad" train transformer --run t2 --set data=pairs:en.txt,de.txt "${small[@]}"
  check "JSON Lines in Hugging Face's layout" 0 "$ctgrad" train transformer --run t3 --set data=pairs.jsonl "${small[@]}"
  head -n 9 pairs.tsv > cut.tsv && printf 'only a source side\n' >> cut.tsv
  check "a pair with a side missing" 2 "$ctgrad" train transformer --run t4 --set data=cut.tsv "${small[@]}"
  expect_text "names the file and line" "cut.tsv: line"
  one_line "one line"
  head -n 5 en.txt > en5.txt
  check "files of different lengths" 2 "$ctgrad" train transformer --run t5 --set data=pairs:en5.txt,de.txt "${small[@]}"
  expect_text "says so" "has more lines than"
  no_file "nothing written" t5/tokenizer.model
else
  fail=$((fail + 1)); echo "FAIL: not run the translation checks: the transformer plug-in is not built or not loaded (a full build makes it)"
fi

# 4. Labelled text for classification (finetune bert --task labels): the label set from the data,
# saved in the checkpoint, used by eval.
if "$ctgrad" help bert > /dev/null 2>&1; then
  awk 'BEGIN { srand(3); for (i = 0; i < 300; i++) { pos = (rand() < 0.5); w = pos ? "wonderful great lovely" : "awful dreadful poor"; split(w, a, " ");
    print "on day " i " the weather was " a[1 + int(rand() * 3)] " and " a[1 + int(rand() * 3)] "\t" (pos ? "positive" : "negative") } }' > reviews.tsv
  awk -F'\t' '{ printf "{\"body\": \"%s\", \"stars\": %d}\n", $1, ($2 == "positive") ? 5 : 1 }' reviews.tsv > reviews.jsonl
  check "pretrain a tiny BERT" 0 "$ctgrad" train bert --run bert_pre --set size=tiny --set steps=10 --set eval_every=10 --threads 1
  check "pretrain BERT on a folder of text" 0 "$ctgrad" train bert --run bert_notes --set data=notes --set size=tiny --set steps=10 --set eval_every=10 --threads 1
  expect_text "trains" "step 10/10"
  ft=(--pretrained bert_pre --set size=tiny --set steps=200 --set eval_every=100 --set batch=16 --set lr=2e-3 --set warmup=20 --threads 1)
  check "fine-tune on a TSV of labelled text" 0 "$ctgrad" finetune bert --task labels --run ft1 --set data=reviews.tsv "${ft[@]}"
  expect_text "reads the label set" "negative"
  expect_text "learns it" "accuracy 1"
  check "eval with the run's label set" 0 "$ctgrad" eval bert-finetune --run ft1
  expect_text "a confusion matrix by label" "1 positive"
  { echo "label,text"; awk -F'\t' '{ printf "%s,\"%s, \"\"quoted\"\"\"\n", $2, $1 }' reviews.tsv; } > reviews.csv
  check "CSV with quoted fields" 0 "$ctgrad" finetune bert --task labels --run ft5 --set data=reviews.csv "${ft[@]}" --set steps=10
  expect_text "reads both labels" "positive"
  check "JSON Lines with integer labels" 0 "$ctgrad" finetune bert --task labels --run ft2 --set data=reviews.jsonl --set text_field=body --set label_field=stars "${ft[@]}" --set steps=10
  expect_text "labels 1 and 5" "5 "
  printf 'no tab in this line\n' > nolabel.tsv
  check "a line without a label" 2 "$ctgrad" finetune bert --task labels --run ft3 --set data=nolabel.tsv "${ft[@]}"
  expect_text "names the file and line" "nolabel.tsv: line 1 has no tab"
  no_file "nothing written" ft3/tokenizer.model
  printf 'a\tone\nb\tone\n' > onelabel.tsv
  check "one label only" 2 "$ctgrad" finetune bert --task labels --run ft4 --set data=onelabel.tsv "${ft[@]}"
  expect_text "says so" "a classifier needs two or more"
  check "an unknown label at eval" 2 "$ctgrad" eval bert-finetune --run ft1 --set val_data=onelabel.tsv
  expect_text "names it" "the label 'one' is not one of the run's 2 labels"
else
  fail=$((fail + 1)); echo "FAIL: not run the classification checks: the bert plug-in is not built or not loaded (a full build makes it)"
fi
# T5: text to text on the user's pairs, classification as text on the user's labels.
if "$ctgrad" help t5 > /dev/null 2>&1; then
  check "pretrain a tiny T5" 0 "$ctgrad" train t5 --run t5_pre --set size=tiny --set steps=10 --set eval_every=10 --threads 1
  check "pretrain T5 on JSON Lines" 0 "$ctgrad" train t5 --run t5_records --set data=body.jsonl --set text_field=body --set size=tiny --set steps=10 --set eval_every=10 --threads 1
  expect_text "trains" "step 10/10"
  t5=(--pretrained t5_pre --set size=tiny --set steps=10 --set eval_every=10 --set eval_examples=8 --set beam=1 --threads 1)
  check "fine-tune T5 on text pairs" 0 "$ctgrad" finetune t5 --task pairs --run t5_pairs --set data=pairs.tsv --set prefix="reverse: " "${t5[@]}"
  expect_text "scores them" "BLEU"
  check "fine-tune T5 on labelled text" 0 "$ctgrad" finetune t5 --task labels --run t5_labels --set data=reviews.csv "${t5[@]}"
  expect_text "classification accuracy" "labels: accuracy"
  check "a mixture of both" 0 "$ctgrad" finetune t5 --task mix:pairs,austen-novel --run t5_mix --set data=pairs.tsv "${t5[@]}"
  check "T5 pairs with a side missing" 2 "$ctgrad" finetune t5 --task pairs --run t5_bad --set data=cut.tsv "${t5[@]}"
  expect_text "names the file and line" "cut.tsv: line"
  no_file "nothing written" t5_bad/tokenizer.model
else
  fail=$((fail + 1)); echo "FAIL: not run the T5 checks: the t5 plug-in is not built or not loaded (a full build makes it)"
fi

# 5. Image folders for ViT (data=images:DIR, one subfolder per class), PNG and JPEG of any size.
if [ -n "$images" ] && "$ctgrad" help vit > /dev/null 2>&1; then
  "$images" shapes 40 && "$images" more_shapes 8
  vit=(--set size=tiny --set epochs=3 --set batch=16 --set image=24 --set patch=6 --set lr=3e-3 --threads 1)
  check "train vit on an image folder" 0 "$ctgrad" train vit --run v1 --set data=images:shapes "${vit[@]}"
  expect_text "reads its classes and images" "3 classes, 24x24 RGB"
  expect_text "tests on the held-out images" "test accuracy"
  check "eval on other images, the run's classes" 0 "$ctgrad" eval vit --run v1 --set val_data=images:more_shapes
  expect_text "a confusion matrix by class" "stripes"
  check "the prediction grid" 0 test -s v1/predictions.png
  check "grey images" 0 "$ctgrad" train vit --run v2 --set data=images:shapes "${vit[@]}" --set channels=1 --set epochs=1
  expect_text "grey" "24x24 grey"
  check "the defaults: 28 x 28 RGB, the preset's patch" 0 "$ctgrad" train vit --run v6 --set data=images:shapes --set size=tiny --set epochs=1 --set batch=16 --threads 1
  expect_text "at 28" "28x28 RGB"
  check "a run folder inside the image folder is refused" 2 "$ctgrad" train vit --run shapes/run --set data=images:shapes --set size=tiny --set epochs=1 --set batch=16
  expect_text "says why" "lies inside the folder"
  no_file "and not made" shapes/run
  cp -r shapes broken && printf 'not a png' > broken/disc/0.png
  check "an image that does not decode" 2 "$ctgrad" train vit --run v3 --set data=images:broken "${vit[@]}"
  expect_text "names it" "broken/disc/0.png is neither PNG nor JPEG"
  one_line "one line"
  no_file "nothing written" v3/checkpoint.safetensors
  mkdir -p broken2/disc broken2/empty && cp shapes/disc/0.png broken2/disc/
  check "a class folder without images" 2 "$ctgrad" train vit --run v4 --set data=images:broken2 "${vit[@]}"
  expect_text "names it" "broken2/empty has no PNG or JPEG images"
  check "a patch that does not divide the image" 2 "$ctgrad" train vit --run v5 --set data=images:shapes "${vit[@]}" --set patch=5
  expect_text "says so" "does not divide"
else
  fail=$((fail + 1)); echo "FAIL: not run the image checks: the vit plug-in or ctgrad-test-images is not built or not loaded (a full build makes it)"
fi

# 6. Bad input: one line naming the file and where; nothing written.
mkdir -p empty && echo x > empty/picture.png
printf 'good line\nbad \xff byte\n' > bad.txt
printf 'text\0binary' > binary.txt
mkfifo fifo
printf '{"text": "ok"}\nnot json\n' > notjson.jsonl
printf '{"text": "ok"}\n{"other": "x"}\n' > nofield.jsonl
head -c $((9 * 1024 * 1024)) /dev/zero | tr '\0' x > toolong.txt  # one line of 9 MiB
seq 1 5000 | gzip | head -c 200 > truncated.txt.gz
: > zero.txt
bad_data() {  # name, data, expected text
  check "$1" 2 "$ctgrad" train gpt --run bad_run --set data="$2" "${tiny[@]}"
  expect_text "$1: says where" "$3"
  one_line "$1: one line"
  no_file "$1: nothing written" bad_run/tokenizer.json
}
bad_data "a folder with no text" empty "has no text: no .txt, .md or .jsonl file"
bad_data "invalid UTF-8" bad.txt "bad.txt: line 2 is not UTF-8: invalid byte 0xff at byte 14 of the file"
bad_data "a binary file" binary.txt "binary.txt: line 1 has a NUL byte at byte 4 of the file: it is binary"
bad_data "a FIFO" fifo "is a FIFO"
bad_data "a device" /dev/zero "is a device"
bad_data "a JSONL line that is not JSON" notjson.jsonl "notjson.jsonl: line 2 is not JSON"
bad_data "a JSONL line without the field" nofield.jsonl "nofield.jsonl: line 2 has no field \"text\""
bad_data "a line longer than the bound" toolong.txt "line 1 is longer than 8 MiB"
bad_data "a truncated gzip file" truncated.txt.gz "ends inside its gzip stream"
bad_data "an empty corpus" zero.txt "has no text"
bad_data "a missing file" nosuch.txt "no such file or folder"
bad_data "a glob matching nothing" 'nothing*.txt' "no file matches"
cp -r whole torn && head -c 1000 whole/train_000001.bin > torn/train_000001.bin
bad_data "a truncated shard" torn "train_000001.bin is 1000 bytes; its header says 256 +"
cp -r whole foreign && printf 'x' >> foreign/tokenizer.model
bad_data "a tokenizer changed after tokenizing" foreign "is not the tokenizer the shards were written with"
cp -r whole mixed && cp shards3/val_000000.bin mixed/val_000000.bin
bad_data "a shard of another vocabulary" mixed "was written with another tokenizer"
cp -r whole headless && printf 'NOTMAGIC' | dd of=headless/val_000000.bin conv=notrunc 2>/dev/null
bad_data "a shard with a broken header" headless "not a token shard"
cp -r whole gap && rm gap/train_000001.bin
bad_data "a missing shard" gap "train_000001.bin is missing"
check "tokenize: a bad file anywhere stops it before it writes" 2 "$ctgrad" data tokenize --data "*.txt" --out never --vocab 64
expect_text "names the file" "bad.txt: line 2 is not UTF-8"
no_file "no shard folder" never/tokenize.json
mkdir -p mine && echo "keep me" > mine/notes.txt
check "tokenize into a folder of the user's files is refused" 2 "$ctgrad" data tokenize --data notes --out mine --vocab 64 --overwrite
check "the user's file is kept" 0 grep -q "keep me" mine/notes.txt

echo "user_data: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
