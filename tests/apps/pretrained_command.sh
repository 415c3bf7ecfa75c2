#!/usr/bin/env bash
# Hugging Face model folders through the command (docs/models/pretrained.md): a GPT run (characters)
# and a Llama run (SentencePiece BPE, RoPE base and llama3 scaling, q/k/v biases: a Qwen2 folder)
# exported, then evaluated and sampled with --from exactly as from their runs; continued
# pretraining with train --from, resumed; a BERT run exported fine-tunes from the folder as from the
# run, and so does a folder with a WordPiece tokenizer.json; a ViT evaluates from its export and
# fine-tunes on other classes; a T5 evaluates, fills spans and fine-tunes from its export; every refusal in one line with exit 2, and a hostile
# folder (an unknown config field, a truncated model.safetensors, a broken merge list) refused.
set -u
source "$(dirname "$0")/checks.sh"  # check, expect_text
ctgrad=$(realpath "$1")
images=$(realpath "$2")  # tests/data/make_images.cpp: synthetic image folders
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export CTGRAD_CACHE="$work/cache"
one_line() {
  if [ "$(wc -l < "$work/out.txt")" -le 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: more than one line:"; cat "$work/out.txt"; fi
}
same() {  # name, file a, file b (neither empty: a command that failed writes nothing)
  if [ -s "$2" ] && cmp -s "$2" "$3"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: $2 and $3 differ:"; diff "$2" "$3" | head; fi
}
quiet=(--set steps=30 --set eval_every=30 --set sample_tokens=0 --set context=32 --threads 2)

# 1. GPT, characters: export, then the folder evaluates and samples as the run does.
check "train gpt" 0 "$ctgrad" train gpt --run gpt --set size=tiny "${quiet[@]}"
check "export gpt" 0 "$ctgrad" export --run gpt --to hf-gpt
expect_text "says what it wrote" "GPT2LMHeadModel"
expect_text "converts the character vocabulary" "tokenizer.json (the character vocabulary"
for f in config.json model.safetensors tokenizer.json; do
  if [ -f "hf-gpt/$f" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL export gpt: no $f"; fi
done
"$ctgrad" eval gpt --run gpt --set context=32 2>/dev/null | sed 's/ nats.*(/ (/; s/, [0-9.]* s)/)/' > eval-run.txt
"$ctgrad" eval gpt --from hf-gpt --set context=32 2>/dev/null | sed 's/ nats.*(/ (/; s/, [0-9.]* s)/)/' > eval-from.txt
same "gpt: eval --from the export = eval --run" eval-run.txt eval-from.txt
"$ctgrad" sample gpt --run gpt --temperature 0 --tokens 40 > sample-run.txt 2>/dev/null
"$ctgrad" sample gpt --from hf-gpt --set context=32 --temperature 0 --tokens 40 > sample-from.txt 2>/dev/null
same "gpt: greedy sample --from the export = from the run" sample-run.txt sample-from.txt

# 2. Llama with SentencePiece BPE, RoPE base 500000, llama3 scaling and q/k/v biases: a Qwen2 folder.
check "train llama" 0 "$ctgrad" train llama --run llama --set size=tiny --set tokenizer=bpe --set vocab=256 --set rope_theta=500000 \
  --set rope_scaling=llama3:8:1:4:16 --set qkv_bias=true "${quiet[@]}"
check "export llama" 0 "$ctgrad" export --run llama --to hf-llama
expect_text "a Qwen2 folder" "Qwen2ForCausalLM"
expect_text "copies the SentencePiece model" "tokenizer.model"
if grep -q '"rope_type": "llama3"' hf-llama/config.json; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL export llama: no llama3 rope_scaling"; fi
"$ctgrad" eval llama --run llama 2>/dev/null | sed 's/, [0-9.]* s)/)/' > eval-run.txt
"$ctgrad" eval llama --from hf-llama --set context=32 2>/dev/null | sed 's/, [0-9.]* s)/)/' > eval-from.txt
same "llama: eval --from the export = eval --run" eval-run.txt eval-from.txt
"$ctgrad" sample llama --run llama --temperature 0 --tokens 30 > sample-run.txt 2>/dev/null
"$ctgrad" sample llama --from hf-llama --set context=32 --temperature 0 --tokens 30 > sample-from.txt 2>/dev/null
same "llama: greedy sample --from the export = from the run" sample-run.txt sample-from.txt
# Continued pretraining from the folder, resumed; its tokenizer is the run's.
check "train --from" 0 "$ctgrad" train llama --from hf-llama --run cont --set steps=10 --set eval_every=5 --set sample_tokens=0 --set context=32 --threads 2
expect_text "loads the folder" "loaded 39712 parameters from hf-llama"
check "resume the continued run" 0 "$ctgrad" train llama --run cont --resume --set steps=20 --set sample_tokens=0
expect_text "resumed" "step 20/20"
check "eval the continued run" 0 "$ctgrad" eval llama --run cont

# Data-parallel continued pretraining: 2 ranks follow the one-process run's curve (within 1e-5: the
# gradients are summed in another order), every rank starting from the folder's weights.
if command -v mpirun > /dev/null; then
  mpirun=(mpirun --oversubscribe -np 2)
  [ "$(id -u)" -eq 0 ] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
  from=(train gpt --from hf-gpt --set steps=6 --set eval_every=3 --set batch=4 --set sample_tokens=0 --set context=32 --threads 1)
  check "train --from, one process" 0 "$ctgrad" "${from[@]}" --run from1
  check "train --from, 2 ranks" 0 "${mpirun[@]}" "$ctgrad" "${from[@]}" --run from2
  expect_text "data-parallel" "data parallel: 2 ranks"
  check "2 ranks from the folder = one process" 0 /usr/bin/python3 - from1 from2 <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(d + "/metrics.jsonl")] for d in sys.argv[1:3])
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
worst = max(abs(x[k] - y[k]) / max(abs(x[k]), 1e-12) for x, y in zip(a, b) for k in x if k == "loss" or k.startswith("val_"))
assert worst < 1e-5, worst
PY
fi

# 3. BERT: a pretrained run exported (BertForMaskedLM, its SentencePiece vocabulary) fine-tunes from
# the folder exactly as from the run; a folder with a WordPiece tokenizer.json fine-tunes too.
check "train bert" 0 "$ctgrad" train bert --run bert --set size=tiny --set steps=20 --set eval_every=20 --threads 2
check "export bert" 0 "$ctgrad" export --run bert --to hf-bert
expect_text "a masked-LM folder" "BertForMaskedLM"
ft=(--set steps=20 --set eval_every=10 --threads 2)
check "finetune bert --from the export" 0 "$ctgrad" finetune bert --from hf-bert --run ft-from "${ft[@]}"
expect_text "the head is new" "new (the task's head): pooler.weight, pooler.bias, cls.out.weight, cls.out.bias"
expect_text "the masked-LM head unread" "unused: 5 tensors of the folder"
check "finetune bert from the run" 0 "$ctgrad" finetune bert --pretrained bert --run ft-run --set size=tiny "${ft[@]}"
check "bert: finetune --from the export = from the run" 0 /usr/bin/python3 - ft-run ft-from <<'PY'
import json, sys
a, b = ([{k: v for k, v in json.loads(l).items() if not k.endswith(("_per_s", "_seconds"))} for l in open(d + "/metrics.jsonl")] for d in sys.argv[1:3])
assert a == b and len(a) > 20, (len(a), len(b))
PY
check "eval the fine-tuned run" 0 "$ctgrad" eval bert-finetune --run ft-from
expect_text "says where it started" "encoder from hf-bert"
check "resume the fine-tuned run" 0 "$ctgrad" train bert-finetune --run ft-from --resume --set steps=30
expect_text "resumed" "step 30/30"
cp -r hf-bert hf-wordpiece && rm hf-wordpiece/tokenizer.model
/usr/bin/python3 - hf-wordpiece/tokenizer.json <<'PY'
import json, string, sys
words = "the of and to a in that he she it was her his be not had with for as you but i is at my by on".split()
vocab = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(string.ascii_lowercase) + ["##" + c for c in string.ascii_lowercase] + \
    list(string.punctuation) + list(string.digits) + words
added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
         for i, t in enumerate(vocab[:7]) if "unused" not in t]
json.dump({"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
           "pre_tokenizer": {"type": "BertPreTokenizer"},
           "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 5], "cls": ["[CLS]", 4]},
           "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
           "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                     "vocab": {t: i for i, t in enumerate(vocab)}}}, open(sys.argv[1], "w"))
PY
check "finetune bert --from a WordPiece folder" 0 "$ctgrad" finetune bert --from hf-wordpiece --run ft-wp "${ft[@]}"
if [ -f ft-wp/tokenizer.json ] && cmp -s ft-wp/tokenizer.json hf-wordpiece/tokenizer.json; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: the folder's tokenizer.json is not the run's"; fi
check "eval the WordPiece run" 0 "$ctgrad" eval bert-finetune --run ft-wp
# The masked LM itself from the folders: evaluated and filling masks as from the run; continued pretraining on WordPiece.
"$ctgrad" eval bert --run bert 2>/dev/null | sed 's/, [0-9.]* s)/)/' > eval-run.txt
"$ctgrad" eval bert --from hf-bert 2>/dev/null | sed 's/, [0-9.]* s)/)/' > eval-from.txt
same "bert: eval --from the export = eval --run" eval-run.txt eval-from.txt
"$ctgrad" fill-mask bert --run bert --text "And God said, Let there be [MASK]." > fill-run.txt 2>/dev/null
"$ctgrad" fill-mask bert --from hf-bert --text "And God said, Let there be [MASK]." > fill-from.txt 2>/dev/null
same "bert: fill-mask --from the export = from the run" fill-run.txt fill-from.txt
check "fill-mask --from a WordPiece folder" 0 "$ctgrad" fill-mask bert --from hf-wordpiece --text "And God said, Let there be [MASK]."
expect_text "fills the mask" "[MASK] 1 of 1"
check "train bert --from a WordPiece folder" 0 "$ctgrad" train bert --from hf-wordpiece --run bert-wp --set steps=10 --set eval_every=5 --threads 2
if cmp -s bert-wp/tokenizer.json hf-wordpiece/tokenizer.json; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: the WordPiece run's tokenizer.json is not the folder's"; fi
check "resume the WordPiece run" 0 "$ctgrad" train bert --run bert-wp --resume --set steps=15
expect_text "resumed" "step 15/15"
check "finetune --from with init=scratch" 2 "$ctgrad" finetune bert --from hf-bert --run x --set init=scratch
one_line "finetune --from with init=scratch"
check "eval bert-finetune --from" 2 "$ctgrad" eval bert-finetune --from hf-bert --run ft-from
expect_text "asks for the run" "eval bert-finetune reads a fine-tuned run"
check "the refused eval left the run as it was" 0 "$ctgrad" eval bert-finetune --run ft-from
check "finetune --from a GPT-2 folder" 2 "$ctgrad" finetune bert --from hf-gpt --run x
expect_text "names the family" "the folder holds a GPT2LMHeadModel: ctgrad's BERT reads BertForMaskedLM and BertForPreTraining folders (ctgrad gpt reads it)"
sed -i 's/"\[CLS\]"/"[KLS]"/g' hf-wordpiece/tokenizer.json
check "a vocabulary without [CLS]" 2 "$ctgrad" finetune bert --from hf-wordpiece --run x
expect_text "names it" "with [CLS] and [SEP]"
no_file "nothing of the refused runs" x/checkpoint.safetensors
no_file "no tokenizer of the refused runs" x/tokenizer.json
no_file "no tokenizer of the refused runs" x/tokenizer.model

# 4. ViT: a Fashion-MNIST run exported (its classes as id2label) evaluates from the folder as from the
# run; train --from fine-tunes it on an image folder of other classes under a new classifier.
check "train vit" 0 "$ctgrad" train vit --run vit --set size=tiny --set epochs=1 --set train_images=1000 --threads 2
check "export vit" 0 "$ctgrad" export --run vit --to hf-vit
expect_text "an image classifier folder" "ViTForImageClassification"
if grep -q '"9": "Ankle boot"' hf-vit/config.json; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL export vit: the classes are not id2label"; fi
"$ctgrad" eval vit --run vit 2>/dev/null | sed 's/, [0-9.]* s)/)/; /^wrote/d; /^$/d' > eval-run.txt
"$ctgrad" eval vit --from hf-vit 2>/dev/null | sed 's/, [0-9.]* s)/)/; /^$/d' > eval-from.txt
same "vit: eval --from the export = eval --run" eval-run.txt eval-from.txt
"$images" shapes 40
check "train vit --from on other classes" 0 "$ctgrad" train vit --from hf-vit --run vit-ft --set data=images:shapes --set epochs=2 --set batch=16 --threads 2
expect_text "a new classifier" "new (the task's head): head.weight, head.bias"
expect_text "the classifier's old head unread" "unused: 2 tensors of the folder"
check "eval the fine-tuned vit" 0 "$ctgrad" eval vit --run vit-ft
check "export the fine-tuned vit" 0 "$ctgrad" export --run vit-ft --to hf-vit-ft
"$ctgrad" eval vit --run vit-ft 2>/dev/null | sed 's/, [0-9.]* s)/)/; /^wrote/d; /^$/d' > eval-run.txt
"$ctgrad" eval vit --from hf-vit-ft --set data=images:shapes 2>/dev/null | sed 's/, [0-9.]* s)/)/; /^$/d' > eval-from.txt
same "vit: eval --from the fine-tuned export = eval --run" eval-run.txt eval-from.txt
/usr/bin/python3 - hf-vit-ft/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["id2label"]["0"], c["id2label"]["1"] = c["id2label"]["1"], c["id2label"]["0"]
json.dump(c, open(sys.argv[1], "w"))
PY
check "eval --from with the classes in another order" 2 "$ctgrad" eval vit --from hf-vit-ft --set data=images:shapes
expect_text "names the class" "its class 0 is"
one_line "eval --from with the classes in another order"
check "eval --from on other classes" 2 "$ctgrad" eval vit --from hf-vit --set data=images:shapes
expect_text "names both" "classifies 10 classes (its id2label), the data has 3"
one_line "eval --from on other classes"

# 5. T5: a pretrained run exported (T5ForConditionalGeneration, its SentencePiece model as spiece.model)
# evaluates and fills spans from the folder as from the run, and fine-tunes from it as from the run; a
# folder in Hugging Face's layout (the vocabulary padded past its pieces and 100 sentinels, as
# t5-small's 32128) finds its sentinels where its pieces end.
check "train t5" 0 "$ctgrad" train t5 --run t5 --set size=tiny --set steps=20 --set eval_every=20 --threads 2
check "export t5" 0 "$ctgrad" export --run t5 --to hf-t5
expect_text "an encoder-decoder folder" "T5ForConditionalGeneration"
expect_text "the SentencePiece model as transformers names it" "spiece.model"
"$ctgrad" eval t5 --run t5 2>/dev/null | sed 's/, [0-9.]* s)/)/' > eval-run.txt
"$ctgrad" eval t5 --from hf-t5 2>/dev/null | sed 's/, [0-9.]* s)/)/' > eval-from.txt
same "t5: eval --from the export = eval --run" eval-run.txt eval-from.txt
fill=(--fill "And God said, Let there be <extra_id_0>: and there was <extra_id_1>." --beam 1 --max-len 12)
"$ctgrad" sample t5 --run t5 "${fill[@]}" > sample-run.txt 2>/dev/null
"$ctgrad" sample t5 --from hf-t5 "${fill[@]}" > sample-from.txt 2>/dev/null
same "t5: greedy span filling --from the export = from the run" sample-run.txt sample-from.txt
t5ft=(--task austen-novel --set steps=10 --set eval_every=10 --set eval_examples=8 --set beam=1 --threads 2)
check "finetune t5 --from the export" 0 "$ctgrad" finetune t5 --from hf-t5 --run t5-from "${t5ft[@]}"
check "finetune t5 from the run" 0 "$ctgrad" finetune t5 --pretrained t5 --run t5-run --set size=tiny "${t5ft[@]}"
check "t5: finetune --from the export = from the run" 0 /usr/bin/python3 - t5-run t5-from <<'PY'
import json, sys
a, b = ([{k: v for k, v in json.loads(l).items() if not k.endswith(("_per_s", "_seconds"))} for l in open(d + "/metrics.jsonl")] for d in sys.argv[1:3])
assert a == b and len(a) >= 10, (len(a), len(b))
PY
check "eval the fine-tuned t5" 0 "$ctgrad" eval t5-finetune --run t5-from
/usr/bin/python3 - hf-t5 hf-t5-padded <<'PY'
import json, os, shutil, struct, sys
src, dst = sys.argv[1:3]
shutil.copytree(src, dst)
raw = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
extra = 28  # rows past the sentinels, as t5-small's 32128 = 32000 pieces + 100 sentinels + 28
tensors, out, at = {}, {}, 0
for name, t in header.items():
    if name == "__metadata__":
        continue
    data = raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]]
    shape = list(t["shape"])
    if name in ("shared.weight", "lm_head.weight"):
        data += b"\0" * (extra * shape[1] * 4)
        shape[0] += extra
    out[name] = {"dtype": t["dtype"], "shape": shape, "data_offsets": [at, at + len(data)]}
    tensors[name], at = data, at + len(data)
text = json.dumps(out).encode()
text += b" " * ((8 - len(text) % 8) % 8)
with open(os.path.join(dst, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(tensors[k] for k in out))
config = json.load(open(os.path.join(src, "config.json")))
config["vocab_size"] += extra
json.dump(config, open(os.path.join(dst, "config.json"), "w"))
PY
check "a T5 folder with a padded vocabulary" 0 "$ctgrad" check t5 --from hf-t5-padded
"$ctgrad" sample t5 --from hf-t5-padded "${fill[@]}" > sample-padded.txt 2>/dev/null
same "t5: the padded folder fills the same spans" sample-run.txt sample-padded.txt
check "finetune t5 --from a BERT folder" 2 "$ctgrad" finetune t5 --from hf-bert --run x
expect_text "names the family" "ctgrad's t5 reads T5ForConditionalGeneration folders (ctgrad finetune bert reads it)"

# 6. Refusals: one line, exit 2, nothing written.
check "--from a run folder" 2 "$ctgrad" eval llama --from llama
expect_text "names what is missing" "not a Hugging Face model folder (no config.json"
one_line "--from a run folder"
check "--from another family's folder" 2 "$ctgrad" eval gpt --from hf-llama
expect_text "names the family" "the folder holds a Qwen2ForCausalLM: ctgrad's gpt reads GPT-2 folders (ctgrad llama reads it)"
check "--from with a size of its own" 2 "$ctgrad" eval llama --from hf-llama --set d_model=64
expect_text "names the key" "its config.json makes d_model=32, the command gives d_model=64"
check "--from with --resume" 2 "$ctgrad" train llama --from hf-llama --run cont --resume
check "--run is the --from folder" 2 "$ctgrad" train llama --from hf-llama --run hf-llama --set steps=1
expect_text "keeps the folder" "which this run reads"
check "tokenizer=hf without --from" 2 "$ctgrad" train llama --run x --set tokenizer=hf --set size=tiny --set steps=1
expect_text "asks for --from" "give the folder with --from DIR"
no_file "nothing of the refused run" x/checkpoint.safetensors
check "export into a non-empty folder" 2 "$ctgrad" export --run gpt --to hf-llama
expect_text "keeps the folder" "is not empty"
check "export a mixture of experts" 0 "$ctgrad" train llama --run moe --set size=tiny --set moe_experts=2 "${quiet[@]}" --set steps=2 --set eval_every=2
check "export a mixture of experts" 2 "$ctgrad" export --run moe --to hf-moe
expect_text "names what has no counterpart" "a mixture of experts (moe_experts) has no Hugging Face"
one_line "export a mixture of experts"

# 7. Hostile folders: each fault named in one line, exit 2.
cp -r hf-llama bad
sed -i 's/"rope_theta"/"rope_thetaa": 1, "rope_theta"/' bad/config.json
check "an unknown config.json field" 2 "$ctgrad" eval llama --from bad
expect_text "names it" "'rope_thetaa' (1) is not a field ctgrad's Qwen2ForCausalLM reads"
one_line "an unknown config.json field"
rm -r bad && cp -r hf-llama bad
sed -i 's/"intermediate_size": 88/"intermediate_size": 96/' bad/config.json
check "sizes that disagree with the tensors" 2 "$ctgrad" eval llama --from bad
expect_text "names the tensor" "config.json makes it"
one_line "sizes that disagree with the tensors"
rm -r bad && cp -r hf-llama bad
truncate -s -100 bad/model.safetensors
check "a truncated model.safetensors" 2 "$ctgrad" eval llama --from bad
expect_text "says so" "model.safetensors"
one_line "a truncated model.safetensors"
rm -r bad && cp -r hf-gpt bad
python3 - bad/tokenizer.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["model"]["merges"] = ["a zz"]
json.dump(j, open(sys.argv[1], "w"))
PY
check "a tokenizer.json with a broken merge list" 2 "$ctgrad" eval gpt --from bad
expect_text "names the merge" "merge 0 ('a' + 'zz') names 'zz', which the vocabulary lacks"
one_line "a tokenizer.json with a broken merge list"

echo "pretrained_command: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
