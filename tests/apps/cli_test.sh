#!/usr/bin/env bash
# End-to-end test of the ctgrad command on the real KJV data: train, eval, sample, bad input, and
# Ctrl-C then --resume, which must end with the same checkpoint bytes as an uninterrupted run.
set -u
source "$(dirname "$0")/checks.sh"  # check, expect_text
ctgrad=$(realpath "$1")
checksum_py=$(cd "$(dirname "$0")/../checkpoint" && pwd)/ctgrad_checksum.py
train_bert_py=$(cd "$(dirname "$0")/../../bench/reference" && pwd)/train_bert.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# A data cache of this test's own (trained tokenizers, encoded corpora): the first BERT, T5 and BPE
# runs fill it, the later ones read it, as a user's runs on one machine do.
export CTGRAD_CACHE="$work/cache"

common=(--set size=tiny --set steps=60 --set eval_every=30 --set batch=8 --set context=32 --set eval_windows=64 --set sample_tokens=20 --threads 2)
check "train" 0 "$ctgrad" train gpt --run straight "${common[@]}"
expect_text "train prints validation" "validation"
for f in checkpoint.safetensors tokenizer.json metrics.jsonl metrics.csv loss.png; do
  check "train writes $f" 0 test -s "straight/$f"
done
check "eval" 0 "$ctgrad" eval gpt --run straight
expect_text "eval prints the loss" "validation loss"
check "sample" 0 "$ctgrad" sample gpt --run straight --prompt "And God" --tokens 20
expect_text "sample continues the prompt" "And God"
check "sample with top-k, top-p, seed" 0 "$ctgrad" sample gpt --run straight --prompt "And" --tokens 40 --top-k 10 --top-p 0.9 --seed 3 --temperature 1.2
"$ctgrad" sample gpt --run straight --seed 7 --tokens 25 > s1.txt 2>&1; "$ctgrad" sample gpt --run straight --seed 7 --tokens 25 > s2.txt 2>&1
check "sample is reproducible" 0 cmp s1.txt s2.txt
check "sample stops at the context" 0 "$ctgrad" sample gpt --run straight --prompt "And" --tokens 100
expect_text "says it stopped at the context" "stopped at the context limit of 32"
check "sample slides past the context" 0 "$ctgrad" sample gpt --run straight --prompt "And" --tokens 100 --slide
check "train with the op profile" 0 env CTGRAD_PROFILE_OPS=1 "$ctgrad" train gpt --run profiled "${common[@]}" --set steps=10 --set sample_tokens=0
expect_text "prints the time by op" "time by op, per training step"
expect_text "the profile names the ops" "attention"
check "train with a BPE tokenizer" 0 "$ctgrad" train gpt --run bpe "${common[@]}" --set tokenizer=bpe
expect_text "BPE run reports nats per token" "nats/token"
check "sample from the BPE model" 0 "$ctgrad" sample gpt --run bpe --prompt "And God" --tokens 10

# Ctrl-C mid-run saves a checkpoint; --resume finishes; the result equals an uninterrupted run.
long=(--set size=tiny --set steps=300 --set eval_every=100 --set batch=8 --set context=32 --set eval_windows=64 --set sample_tokens=0 --threads 2)
check "train long" 0 "$ctgrad" train gpt --run straight_long "${long[@]}"
"$ctgrad" train gpt --run interrupted "${long[@]}" > interrupted.log 2>&1 &
pid=$!
# Signalled once it is training (its metrics have 11 steps): not before its handler is installed,
# however slow or loaded the machine; a generous deadline only catches a run that never starts.
started=0
for _ in $(seq 1 6000); do
  if [ -f interrupted/metrics.csv ] && [ "$(wc -l < interrupted/metrics.csv)" -ge 12 ]; then started=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.02
done
if [ "$started" -eq 1 ]; then
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  if [ "$rc" -eq 130 ] && grep -q "checkpoint saved" interrupted.log; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL ctrl-c: exit $rc"; cat interrupted.log; fi
else
  kill "$pid" 2>/dev/null; wait "$pid"
  fail=$((fail + 1)); echo "FAIL ctrl-c: the run ended or did not reach step 11 within 120 s before it could be interrupted"; cat interrupted.log
fi

check "resume" 0 "$ctgrad" train gpt --run interrupted --resume "${long[@]}"
expect_text "resume says where it starts" "resuming at step"
check "resumed run ends bit-identical" 0 cmp straight_long/checkpoint.safetensors interrupted/checkpoint.safetensors

# Bad input: a one-line error and a non-zero exit.
check "unknown key" 2 "$ctgrad" train gpt --set nope=1
expect_text "unknown key is named" "unknown config key 'nope'"
check "bad value" 2 "$ctgrad" train gpt --set steps=many
check "unknown model" 2 "$ctgrad" train gpt5
check "unknown char in prompt" 2 "$ctgrad" sample gpt --run straight --prompt "x ~ y"
expect_text "unknown char is named" "character '~' (byte 126) at position 2"
check "context longer than the model reads" 2 "$ctgrad" train gpt --run other --set context=999 --set max_context=64
check "prompt longer than the trained context" 2 "$ctgrad" sample gpt --run straight --prompt "$(printf 'And %.0s' {1..20})"
expect_text "names the context" "longer than the context of 32"
check "eval at a longer context than trained" 2 "$ctgrad" eval gpt --run straight --set context=64
check "checkpoint of another size" 2 "$ctgrad" train gpt --run straight --resume --set size=small
mkdir -p other_model && /usr/bin/python3 - straight/checkpoint.safetensors other_model/checkpoint.safetensors <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
header["__metadata__"]["model"] = "vit"
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
PY
/usr/bin/python3 "$checksum_py" --reseal other_model/checkpoint.safetensors  # a consistent file of another model
check "checkpoint of another model" 2 "$ctgrad" eval gpt --run other_model
expect_text "names the other model" "checkpoint of model 'vit', not gpt"
check "bad number" 2 "$ctgrad" sample gpt --run straight --top-k many
check "not a finite number" 2 "$ctgrad" eval gpt --run straight --set lr=nan
check "bad sampling option" 2 "$ctgrad" sample gpt --run straight --top-p 0
expect_text "names the option" "option --top-p must be in (0, 1], got 0"
check "resume a finished run" 0 "$ctgrad" train gpt --run straight --resume "${common[@]}"
expect_text "says there is nothing to train" "nothing to train"
check "no checkpoint" 2 "$ctgrad" eval gpt --run nowhere
printf '{"steps": 5, "wrong": 1}' > bad.json
check "config file with unknown key" 2 "$ctgrad" train gpt --config bad.json
# The Transformer: copy task end to end, a translation smoke run (BLEU, beam, heatmaps), its errors.
check "transformer copy task" 0 "$ctgrad" train transformer --run copy --set task=copy --set steps=300 --set batch=32 --set eval_every=150 --set warmup=300 --threads 2
check "transformer copy eval" 0 "$ctgrad" eval transformer --run copy
expect_text "copy eval counts exact copies" "held-out sequences copied exactly"
check "transformer translate smoke" 0 "$ctgrad" train transformer --run translate --set steps=4 --set eval_every=2 --set batch=16 --threads 2
expect_text "translate prints the split" "sentence pairs and"
pairs_all=$(sed -n 's/.*(data=sentences): \([0-9]*\) sentence pairs.*/\1/p' "$work/out.txt")
check "train on a tenth of the data (the data-size curve)" 0 "$ctgrad" train transformer --run translate_tenth --set train_fraction=0.1 --set steps=1 --set eval_every=1 --set batch=16 --threads 2
pairs_tenth=$(sed -n 's/.*(data=sentences): \([0-9]*\) sentence pairs.*/\1/p' "$work/out.txt")
check "a tenth of the sentence pairs train ($pairs_tenth of $pairs_all)" 0 awk -v a="$pairs_all" -v t="$pairs_tenth" 'BEGIN { exit !(a > 1000 && t > 0.09 * a && t < 0.11 * a) }'
check "a fraction above 1" 2 "$ctgrad" train transformer --run nothing --set train_fraction=1.5
check "transformer translate eval" 0 "$ctgrad" eval transformer --run translate --set eval_sentences=4 --set beam=2 --attention-png translate/att
expect_text "eval prints BLEU for greedy" "greedy:        BLEU = "
expect_text "eval prints BLEU for beam" "beam 2, a 0.6: BLEU = "
expect_text "eval reports the decoding speed" "sentences/s"
for f in enc_layer0.png dec_layer2.png cross_layer1.png; do check "heatmap $f" 0 test -s "translate/att/$f"; done
check "train on the whole dictionary with the game's dialogue, token batches" 0 "$ctgrad" train transformer --run translate_all --set data=ding+wesnoth --set phrase_weight=2 --set batch_tokens=600 --set steps=3 --set eval_every=3 --threads 2
expect_text "says what it trains on" "dictionary phrases train (2.0 phrases per pair an epoch)"
expect_text "and the game's test" "Wesnoth test"
check "another vocabulary size" 0 "$ctgrad" train transformer --run translate_v4k --set vocab=4000 --set steps=2 --set eval_every=2 --set batch=16 --threads 2
expect_text "trains its tokenizer to that size" "shared BPE vocabulary of 4000"
check "its eval" 0 "$ctgrad" eval transformer --run translate_v4k --set eval_sentences=2 --set beam=2
check "vocab below its range" 2 "$ctgrad" train transformer --run nothing --set vocab=100
expect_text "names the range" "must be an integer in [256, 131072]"
check "transformer: any sizes and three architecture keys" 0 "$ctgrad" train transformer --run tr_sizes --set d_model=48 --set heads=3 --set layers=1 --set d_ff=80 \
  --set norm=pre --set act=gelu --set pos=learned --set vocab=1000 --set steps=2 --set eval_every=2 --set batch=8 --threads 2
expect_text "says its sizes" "1+1 layers, d_model 48, 3 heads, d_ff 80 (pre-norm LayerNorm, gelu, learned positions"
check "its eval decodes at those sizes" 0 "$ctgrad" eval transformer --run tr_sizes --set eval_sentences=2 --set beam=2
check "transformer: learned positions fewer than max_len" 2 "$ctgrad" train transformer --run nothing --set pos=learned --set max_context=32
expect_text "names both keys" "positions (max_context): max_len 64 is longer"
check "translate a sentence" 0 "$ctgrad" translate transformer --run translate --text "Everything went without a hitch." --beam 2
check "translate lines from standard input, batched" 0 bash -c "printf 'The house is small.\n\nI am going home.\n' | '$ctgrad' translate transformer --run translate --batch 2 --beam 2 > translate/out.txt && test \$(wc -l < translate/out.txt) -eq 3 && sed -n 2p translate/out.txt | grep -qx ''"
printf 'The <b>house</b> is %%s small.\n\nI am going home.\n' > translate_in.txt
check "translate a file: markup and placeholders kept" 0 bash -c "'$ctgrad' translate transformer --run translate --input translate_in.txt --beam 2 > translate/file.txt && test \$(wc -l < translate/file.txt) -eq 3 && head -1 translate/file.txt | grep -F '<b>' | grep -F '</b>' | grep -qF '%s'"
expect_text "says how fast" "sentences/s"
check "translate: a missing --input" 2 "$ctgrad" translate transformer --run translate --input no_such_file.txt
expect_text "names it" "--input no_such_file.txt: no such file"
check "translate: an empty --text" 2 "$ctgrad" translate transformer --run translate --text "  "
check "transformer on a gpt checkpoint" 2 "$ctgrad" eval transformer --run straight
expect_text "names the model" "is a checkpoint of model 'gpt', not transformer"
check "unknown task" 2 "$ctgrad" train transformer --run nothing --set task=summarize
check "transformer cannot sample" 2 "$ctgrad" sample transformer --run copy
# Bahdanau's RNN encoder-decoder: the Transformer's data, BLEU, heatmaps and translate.
check "seq2seq smoke" 0 "$ctgrad" train seq2seq --run s2s --set size=tiny --set steps=4 --set eval_every=2 --set batch=16 --threads 2
expect_text "seq2seq names its model" "GRU encoder-decoder with additive attention (Bahdanau)"
check "seq2seq eval with its attention heatmap" 0 "$ctgrad" eval seq2seq --run s2s --set eval_sentences=4 --set beam=2 --attention-png s2s/att
expect_text "seq2seq eval prints BLEU for beam" "beam 2, a 0.6: BLEU = "
check "its heatmap" 0 test -s s2s/att/attention.png
check "seq2seq translate" 0 bash -c "printf 'The house is small.\n\nI am going home.\n' | '$ctgrad' translate seq2seq --run s2s --beam 2 > s2s/out.txt && test \$(wc -l < s2s/out.txt) -eq 3"
check "seq2seq of any size" 0 "$ctgrad" train seq2seq --run s2s_sizes --set size=tiny --set hidden=24 --set embed=16 --set layers=3 --set vocab=1000 \
  --set steps=2 --set eval_every=2 --set batch=8 --threads 2
expect_text "says its sizes" "3+3 layers, embedding 16, hidden 24"
check "seq2seq: more layers than it stacks" 2 "$ctgrad" train seq2seq --run nothing --set layers=9
# The ViT: a smoke run on a few hundred images, eval with a confusion matrix and a prediction grid.
check "vit smoke" 0 "$ctgrad" train vit --run vit --set size=tiny --set epochs=2 --set train_images=512 --set batch=64 --threads 2
expect_text "vit reports test accuracy per epoch" "epoch 2: train loss"
check "vit eval" 0 "$ctgrad" eval vit --run vit
expect_text "vit eval prints the confusion matrix" "confusion matrix (rows: true class, columns: predicted)"
check "vit prediction grid" 0 test -s vit/predictions.png
check "an unknown pooling is refused" 2 "$ctgrad" train vit --run vit2 --set size=tiny --set pool=max
expect_text "names the choices" "not one of: cls, mean"
bert=(--set size=tiny --set context=32 --set steps=30 --set eval_every=15 --set batch=16 --set eval_sequences=64 --threads 2)
entries=$(ls cache | wc -l)
check "train bert" 0 "$ctgrad" train bert --run bert "${bert[@]}"
expect_text "bert prints the unigram baseline" "unigram baseline on the validation masks"
expect_text "bert prints the masked-token accuracy beside the baseline" "masked-token accuracy"
expect_text "bert ends with a fill-mask" "And God said, Let there be"
check "it kept the novels, bert's tokenizer and its encoded corpus in the cache" 0 test "$(ls cache | wc -l)" -ge $((entries + 4))
entries=$(ls cache | wc -l)
check "train bert from the data cache" 0 "$ctgrad" train bert --run bert_cached "${bert[@]}" --set steps=3 --set eval_every=3
check "it added nothing to the cache ($entries entries)" 0 test "$(ls cache | wc -l)" -eq "$entries"
check "its tokenizer is the first run's, byte for byte" 0 cmp bert/tokenizer.model bert_cached/tokenizer.model
check "train bert without the data cache" 0 env CTGRAD_CACHE=off "$ctgrad" train bert --run bert_uncached "${bert[@]}" --set steps=3 --set eval_every=3
check "nor the tokenizer's bytes" 0 cmp bert_cached/tokenizer.model bert_uncached/tokenizer.model
check "the cache changes no loss" 0 cmp <(grep -o '"loss":[^,]*' bert_cached/metrics.jsonl) <(grep -o '"loss":[^,]*' bert_uncached/metrics.jsonl)
check "train bert with whole-word masking" 0 "$ctgrad" train bert --run bert_wwm "${bert[@]}" --set whole_word=true --set steps=2 --set context=16
check "train bert with next-sentence prediction" 0 "$ctgrad" train bert --run bert_nsp "${bert[@]}" --set next_sentence=true --set steps=4 --set eval_every=2
check "eval bert with next-sentence prediction" 0 "$ctgrad" eval bert --run bert_nsp
expect_text "eval prints the next-sentence accuracy" "next-sentence accuracy"
check "train bert pre-norm" 0 "$ctgrad" train bert --run bert_pre "${bert[@]}" --set pre_norm=true --set steps=2 --set context=32
check "fill-mask with the pre-norm model" 0 "$ctgrad" fill-mask bert --run bert_pre --text "the [MASK] of" --top-k 2
check "eval bert" 0 "$ctgrad" eval bert --run bert
expect_text "eval bert prints loss and accuracy" "masked-token accuracy"
check "fill-mask" 0 "$ctgrad" fill-mask bert --run bert --text "And God said, Let there be [MASK]." --top-k 3
expect_text "fill-mask lists candidates with the filled text" "And God said, Let there be"
check "fill-mask with two masks" 0 "$ctgrad" fill-mask bert --run bert --text "[MASK] the [MASK] of the LORD"
expect_text "each mask gets its list" "[MASK] 2 of 2"
check "fill-mask without a mask" 2 "$ctgrad" fill-mask bert --run bert --text "no mask here"
expect_text "says there is no mask" "has no [MASK] to fill"
check "fill-mask longer than the context" 2 "$ctgrad" fill-mask bert --run bert --text "$(printf '[MASK] and %.0s' {1..40})"
expect_text "names the context" "more than the model's context"
check "a GPT checkpoint given to BERT" 2 "$ctgrad" eval bert --run straight
expect_text "names both models" "checkpoint of model 'gpt', not bert"
check "masking rates over 1" 2 "$ctgrad" train bert --run bert_bad "${bert[@]}" --set to_mask=0.9 --set to_random=0.2
check "eval bert at a longer context than trained" 2 "$ctgrad" eval bert --run bert_wwm --set context=32
expect_text "names the trained context" "was trained with context 16"
check "export-batches of a next-sentence run" 2 "$ctgrad" export-batches bert --run bert_nsp --steps 2
expect_text "says what it covers" "export-batches covers masked-LM runs"
check "export bert's batches" 0 "$ctgrad" export-batches bert --run bert --steps 4 --out batches.safetensors
expect_text "says what it wrote" "wrote batches.safetensors: 4 training batches"
check "PyTorch trains on the exported batches" 0 env OMP_NUM_THREADS=1 /usr/bin/python3 -E -s "$train_bert_py" batches.safetensors --eval-every 2 --threads 1
expect_text "PyTorch validates" "val_accuracy"
ft=(--set size=tiny --set context=32 --set steps=20 --set eval_every=10 --set batch=16 --threads 2)
check "finetune bert" 0 "$ctgrad" finetune bert --task austen-novel --pretrained bert --run ft "${ft[@]}"
expect_text "finetune loads the encoder" "encoder tensors from bert/checkpoint.safetensors; the pooler and the output layer start new"
expect_text "finetune reports the class balance" "Northanger Abbey"
expect_text "finetune reports the majority baseline" "majority-class baseline"
check "finetune from a next-sentence pretraining" 0 "$ctgrad" finetune bert --pretrained bert_nsp --run ft_nsp "${ft[@]}" --set steps=2
expect_text "loads its pooler" "the pooler too (next-sentence prediction trained it)"
check "eval the fine-tuned classifier" 0 "$ctgrad" eval bert-finetune --run ft
expect_text "prints the confusion matrix" "confusion matrix (rows: true novel"
check "finetune from scratch, frozen and slower encoder options" 0 "$ctgrad" finetune bert --pretrained bert --init scratch --run ft2 "${ft[@]}" --set steps=2 --set freeze=2 --set encoder_lr=0.1
expect_text "says from scratch" "encoder from scratch"
check "resume a fine-tune" 0 "$ctgrad" finetune bert --pretrained bert --run ft2 --resume "${ft[@]}" --set steps=4 --init scratch --set freeze=2 --set encoder_lr=0.1
expect_text "resumes" "resuming at step 3"
check "an unknown fine-tuning task" 2 "$ctgrad" finetune bert --task imdb --pretrained bert --run ft3 "${ft[@]}"
expect_text "names the tasks" "not one of: austen-novel"
check "a GPT run as the pretrained BERT" 2 "$ctgrad" finetune bert --pretrained straight --run ft3 "${ft[@]}"
expect_text "says it is not bert" "a checkpoint of model 'gpt', not bert"
check "a pretrained run of another size" 2 "$ctgrad" finetune bert --pretrained bert --run ft3 "${ft[@]}" --set size=small
expect_text "names the size" "was trained with another model: --set size=tiny"
check "a pre-norm pretrained run as a post-norm one" 2 "$ctgrad" finetune bert --pretrained bert_pre --run ft3 "${ft[@]}"
expect_text "names the switch" "was trained with another model: --set pre_norm=true"
check "finetune from the pre-norm run" 0 "$ctgrad" finetune bert --pretrained bert_pre --run ft_pre "${ft[@]}" --set pre_norm=true --set steps=2
expect_text "loads its final norm too" "loaded 39 encoder tensors"
check "finetune reading the mean of the passage's vectors" 0 "$ctgrad" finetune bert --pretrained bert --run ft_mean "${ft[@]}" --set pool=mean --set steps=2
check "no pretrained run" 2 "$ctgrad" finetune bert --pretrained nowhere --run ft3 "${ft[@]}"
expect_text "says pretrain first" "pretrain first"
cp -r bert bert_swapped && printf "x" >> bert_swapped/tokenizer.model
check "a pretrained run whose vocabulary was swapped" 2 "$ctgrad" finetune bert --pretrained bert_swapped --run ft3 "${ft[@]}"
expect_text "says the vocabulary differs" "its vocabulary would not match the weights"
check "a context longer than the pretraining's" 2 "$ctgrad" finetune bert --pretrained bert_wwm --run ft3 "${ft[@]}"
expect_text "names both contexts" "longer than the pretrained run's 16"
check "freezing more than the model has" 2 "$ctgrad" finetune bert --pretrained bert --run ft3 "${ft[@]}" --set freeze=9
check "bert of any size" 0 "$ctgrad" train bert --run bert_sizes "${bert[@]}" --set d_model=48 --set heads=3 --set layers=3 --set d_ff=96 --set steps=2 --set eval_every=2
expect_text "says its sizes" "3 layers, 3 heads, d_model 48, d_ff 96"
check "its fine-tuning needs the same sizes" 2 "$ctgrad" finetune bert --pretrained bert_sizes --run ft3 "${ft[@]}"
expect_text "names each key to set" "--set d_model=48 --set layers=3 --set heads=3 --set d_ff=96"
check "finetune at its sizes" 0 "$ctgrad" finetune bert --pretrained bert_sizes --run ft_sizes "${ft[@]}" --set d_model=48 --set heads=3 --set layers=3 --set d_ff=96 --set steps=2

# T5: span-corruption pretraining, span filling, text-to-text fine-tuning (one task, a mixture).
t5=(--set size=tiny --set steps=20 --set eval_every=10 --set batch=8 --set eval_sequences=32 --threads 2)
check "train t5" 0 "$ctgrad" train t5 --run t5 "${t5[@]}"
expect_text "t5 prints the unigram baseline" "unigram baseline on the validation targets"
expect_text "t5 ends with a span fill" "In the beginning ["
check "eval t5" 0 "$ctgrad" eval t5 --run t5
expect_text "eval t5 prints the loss" "target-token accuracy"
check "sample t5 fills two spans" 0 "$ctgrad" sample t5 --run t5 --fill "And God <extra_id_0> light: and there <extra_id_1>." --beam 2 --max-len 6
expect_text "shows the beam's fill" "beam 2"
check "train t5 with AdamW and the tied output" 0 "$ctgrad" train t5 --run t5_adamw "${t5[@]}" --set optimizer=adamw --set tied=true --set steps=4
check "t5 of any size: 3 encoder layers, 1 decoder layer, 3 heads" 0 "$ctgrad" train t5 --run t5_sizes "${t5[@]}" --set layers=3 --set dec_layers=1 --set d_model=48 \
  --set heads=3 --set vocab=600 --set steps=2
expect_text "says its sizes" "3+1 layers, 3 heads, d_model 48"
check "its span fill decodes at those sizes" 0 "$ctgrad" sample t5 --run t5_sizes --max-len 4
check "a text without a sentinel" 2 "$ctgrad" sample t5 --run t5 --fill "In the beginning God created"
expect_text "says there is nothing to fill" "has no sentinel to fill"
check "sentinels out of order" 2 "$ctgrad" sample t5 --run t5 --fill "In <extra_id_1> beginning <extra_id_0> created"
expect_text "says which comes next" "out of order: <extra_id_1> where <extra_id_0> comes next"
check "a sentinel past the 100" 2 "$ctgrad" sample t5 --run t5 --fill "In <extra_id_100> beginning"
check "a BERT checkpoint given to T5" 2 "$ctgrad" eval t5 --run bert
check "a BERT run as the pretrained T5" 2 "$ctgrad" finetune t5 --task translate-en-de --pretrained bert --run t5ft_x --set size=tiny
expect_text "says it is not t5" "a checkpoint of model 'bert', not t5"
t5ft=(--set size=tiny --set steps=6 --set eval_every=3 --set batch=8 --set eval_examples=4 --set beam=2 --threads 2)
check "finetune t5 on translation" 0 "$ctgrad" finetune t5 --task translate-en-de --pretrained t5 --run t5ft "${t5ft[@]}"
expect_text "loads the pretrained weights" "loaded all"
expect_text "reports BLEU" "translate-en-de: 4 test sentences, greedy BLEU"
check "finetune t5 on a mixture, from scratch" 0 "$ctgrad" finetune t5 --task mix:translate-de-en,austen-novel --pretrained t5 --init scratch --run t5mix "${t5ft[@]}"
expect_text "reports the novel's accuracy" "austen-novel: accuracy"
check "eval t5-finetune" 0 "$ctgrad" eval t5-finetune --run t5mix
check "an unknown task in a mixture" 2 "$ctgrad" finetune t5 --task mix:translate-en-de,summarize --pretrained t5 --run t5ft_x "${t5ft[@]}"
expect_text "names the unknown task" "names an unknown task 'summarize'"
check "a mixture of one task" 2 "$ctgrad" finetune t5 --task mix:austen-novel --pretrained t5 --run t5ft_x "${t5ft[@]}"
check "a pretrained T5 of another size" 2 "$ctgrad" finetune t5 --task austen-novel --pretrained t5 --run t5ft_x "${t5ft[@]}" --set size=small
expect_text "names the size" "was trained with another model: --set size=tiny"

# Ablation studies: a tiny grid of two architectures x 2 seeds end to end, its report, a rerun that
# skips finished runs, a half-finished run continued, and the refusals.
study=(--set size=tiny --set steps=20 --set eval_every=10 --set context=32 --set batch=8 --set eval_windows=16 --set sample_tokens=0)
check "ablate: 2 architectures x 2 seeds" 0 "$ctgrad" ablate gpt --grid norm=pre,post --seeds 2 "${study[@]}" --jobs 2 --run study
expect_text "says what it runs" "2 configurations x 2 seeds = 4 runs (4 to run), 2 at a time"
for f in study.json results.md results.csv results.json results.html curves.png final.png; do check "ablate writes $f" 0 test -s "study/$f"; done
check "each run keeps its result" 0 test -s "study/runs/001_norm_post/seed2/result.json"
check "each run keeps its config" 0 grep -q '"norm":"post"' "study/runs/001_norm_post/seed2/run.json"
check "each run keeps its commit" 0 grep -q '"commit"' "study/runs/001_norm_post/seed2/result.json"
check "the post-norm run trained the post-norm graph" 0 grep -q "post-norm LayerNorm" "study/runs/001_norm_post/seed2/train.log"
check "the report compares with the baseline" 0 grep -q "| \`norm=post\` | 2 |" study/results.md
check "the html holds its plots" 0 grep -q "data:image/png;base64," study/results.html
check "ablate again: nothing to run" 0 "$ctgrad" ablate gpt --grid norm=pre,post --seeds 2 "${study[@]}" --jobs 2 --run study
expect_text "skips the finished runs" "(0 to run)"
rm study/runs/000_norm_pre/seed1/result.json
check "ablate continues a half-finished run" 0 "$ctgrad" ablate gpt --grid norm=pre,post --seeds 2 "${study[@]}" --run study
expect_text "runs only it" "(1 to run)"
check "its run resumed" 0 grep -q "nothing to train" study/runs/000_norm_pre/seed1/train.log
check "a runtime key in a grid" 0 "$ctgrad" ablate gpt --grid lr=1e-3,3e-3 --seeds 1 "${study[@]}" --run study_lr
check "ablate: another study in the folder" 2 "$ctgrad" ablate gpt --grid norm=pre,post --grid lr=1e-3,2e-3 "${study[@]}" --run study
expect_text "refuses it" "holds another study"
check "ablate: an unknown key" 2 "$ctgrad" ablate gpt --grid lrr=1e-3 --run study_x
expect_text "names the closest key" "did you mean 'lr'?"
check "ablate: a value out of range" 2 "$ctgrad" ablate gpt --grid lr=1e-3,0 --run study_x
expect_text "names the key" "lr"
check "ablate: a value its model refuses" 2 "$ctgrad" ablate gpt --grid dropout=0,2 "${study[@]}" --run study_x
expect_text "names the configuration" "dropout=2 cannot run"
check "ablate: too many runs without --yes" 2 "$ctgrad" ablate gpt --grid lr=1e-3,2e-3,3e-3 --grid dropout=0,0.1,0.2,0.3 --seeds 5 --run study_x
expect_text "asks for --yes" "add --yes"
check "ablate: the seeds are the study's" 2 "$ctgrad" ablate gpt --grid lr=1e-3 --set seed=4 --run study_x
# The GPT and the Llama build their graphs from the config at run time: any size, any combination.
check "train gpt of any size: d_model 96, 3 layers, 3 heads" 0 "$ctgrad" train gpt --set d_model=96 --set layers=3 --set heads=3 "${study[@]}" --run gpt_96 --threads 2
expect_text "says its size" "3 layers, 3 heads, d_model 96"
check "it samples" 0 "$ctgrad" sample gpt --run gpt_96 --tokens 20 --prompt "And God"
check "train gpt with three architecture keys changed" 0 "$ctgrad" train gpt --set norm=post --set act=relu --set pos=none "${study[@]}" --run gpt_arch3 --threads 2
expect_text "says the architecture" "post-norm LayerNorm, relu, no positions"
check "train llama wider and deeper, a mixture of 8 experts top-3" 0 "$ctgrad" train llama --set d_model=48 --set layers=3 --set heads=6 --set kv_heads=3 \
  --set moe_experts=8 --set moe_top_k=3 "${study[@]}" --run llama_x --threads 2
expect_text "says its size" "3 layers, 6 heads over 3 key/value heads, d_model 48"
check "its eval" 0 "$ctgrad" eval llama --run llama_x --threads 2
check "train: heads that do not divide the width" 2 "$ctgrad" train gpt --set heads=3 --run variant_x
expect_text "names both keys" "heads 3 does not divide d_model 128"
no_file "nothing is written" variant_x/run.json
check "train: kv_heads that do not divide the heads" 2 "$ctgrad" train llama --set kv_heads=3 --run variant_x
expect_text "names both keys" "kv_heads 3 does not divide heads 4"
check "train: an odd head width under RoPE" 2 "$ctgrad" train llama --set d_model=36 --set heads=4 --set kv_heads=1 --run variant_x
expect_text "says why" "a head width of 9: rotary positions pair features"
check "a context longer than the preset's grows the model with it" 0 "$ctgrad" train gpt --set context=96 --set size=tiny --set steps=2 --set eval_every=2 \
  --set batch=2 --set eval_windows=2 --set sample_tokens=0 --run gpt_ctx --threads 2
check "eval at a longer context than trained is refused" 2 "$ctgrad" eval gpt --run gpt_ctx --set context=128
check "a Transformer with learned positions trains and translates on the copy task" 0 "$ctgrad" train transformer --set task=copy --set pos=learned --set steps=30 --set batch=8 --set eval_every=30 --run copy_learned --threads 2
check "its eval decodes with its own step graph" 0 "$ctgrad" eval transformer --run copy_learned
# Checkpoint averaging (the paper's last 5): kept checkpoints, their mean, eval of it.
check "train keeping the last 3 checkpoints" 0 "$ctgrad" train transformer --set task=copy --set steps=40 --set batch=8 --set eval_every=10 --set keep_checkpoints=3 --run kept --threads 2
check "it keeps 3" 0 test "$(ls kept/checkpoint-*.safetensors | wc -l)" -eq 3
check "average-checkpoints" 0 "$ctgrad" average-checkpoints transformer --run kept --last 3
expect_text "names the steps" "steps 20, 30, 40"
check "eval reads the averaged checkpoint" 0 "$ctgrad" eval transformer --run kept --checkpoint averaged.safetensors
check "average-checkpoints: a run that kept none" 2 "$ctgrad" average-checkpoints transformer --run copy_learned
expect_text "says how to keep them" "keep_checkpoints"
check "average-checkpoints: another model's run" 2 "$ctgrad" average-checkpoints gpt --run kept
check "average-checkpoints: over the run's own checkpoint" 2 "$ctgrad" average-checkpoints transformer --run kept --out checkpoint.safetensors
check "eval: a missing --checkpoint file" 2 "$ctgrad" eval transformer --run kept --checkpoint nothing.safetensors
check "a ViT of other sizes and architecture trains" 0 "$ctgrad" train vit --set size=tiny --set norm=post --set act=swiglu --set pool=mean --set d_model=24 \
  --set heads=3 --set patch=4 --set layers=3 --set epochs=1 --set train_images=64 --set batch=32 --run vit_post --threads 2
expect_text "says its sizes" "7x7 patches of 4, d_model 24, 3 layers, 3 heads"
check "vit: a patch that does not divide the image" 2 "$ctgrad" train vit --set patch=5 --run nothing
expect_text "says why" "patch 5 does not divide the images' side of 28 pixels"

# What a user saved is kept: a run folder is not trained over, a swapped tokenizer is refused,
# SIGTERM saves like Ctrl-C, a diverged run keeps its last good checkpoint, metrics have no
# duplicated steps after a kill -9 and a resume.
check "train over a run" 2 "$ctgrad" train gpt --run straight "${common[@]}"
expect_text "says how to go on" "holds a run (checkpoint.safetensors): continue it with --resume"
check "train over a run with --overwrite" 0 "$ctgrad" train gpt --run overwritten "${common[@]}" --set steps=2 --set sample_tokens=0
check "again, overwriting it" 0 "$ctgrad" train gpt --run overwritten "${common[@]}" --set steps=2 --set sample_tokens=0 --overwrite
# Mixed precision: bf16 where the CPU has AVX512-BF16, else a warning naming it and fp32.
check "train in bf16 precision" 0 "$ctgrad" train gpt --run bf16 "${common[@]}" --set steps=2 --set sample_tokens=0 --set precision=bf16
if grep -q "warning: precision=bf16" "$work/out.txt"; then expect_text "names what bf16 needs" "precision=bf16 needs"; fi
check "the run records its precision" 0 grep -q '"precision":"bf16"' bf16/run.json
check "eval it in fp32" 0 "$ctgrad" eval gpt --run bf16 --set precision=fp32
check "an unknown precision" 2 "$ctgrad" train gpt --run fp16 "${common[@]}" --set precision=fp16
expect_text "names the choices" "bf16"
cp -r straight swapped && printf '{"kind":"char","chars":[10,32,65,66]}' > swapped/tokenizer.json
check "a tokenizer changed after training" 2 "$ctgrad" eval gpt --run swapped
expect_text "names the tokenizer" "is not the one"
check "a diverging run" 3 "$ctgrad" train gpt --run diverged "${common[@]}" --set init_std=1e30
expect_text "says the loss is not finite" "the training loss is"
"$ctgrad" train gpt --run terminated "${long[@]}" > terminated.log 2>&1 &
pid=$!
for _ in $(seq 1 6000); do
  [ -f terminated/metrics.csv ] && [ "$(wc -l < terminated/metrics.csv)" -ge 12 ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.02
done
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
if [ "$rc" -eq 130 ] && grep -q "checkpoint saved" terminated.log; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL sigterm: exit $rc"; cat terminated.log; fi
"$ctgrad" train gpt --run killed "${long[@]}" > killed.log 2>&1 &
pid=$!
for _ in $(seq 1 6000); do  # past the checkpoint at step 100, before the end
  [ -f killed/metrics.csv ] && [ "$(wc -l < killed/metrics.csv)" -ge 130 ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.02
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check "resume after kill -9" 0 "$ctgrad" train gpt --run killed --resume "${long[@]}"
check "metrics: each step once, in order" 0 /usr/bin/python3 -c '
import sys
steps = [int(l.split(",")[0]) for l in open("killed/metrics.csv").read().splitlines()[1:]]
sys.exit(0 if steps == list(range(1, len(steps) + 1)) and len(steps) == 300 else 1)'
check "killed and resumed run ends bit-identical" 0 cmp straight_long/checkpoint.safetensors killed/checkpoint.safetensors

# Hostile input: one-line errors with exit 2, nothing crashes, hangs or trains into garbage.
# A checkpoint whose stored metadata was edited: copy the run, rewrite one metadata entry. The
# checksum covers the metadata, so an edit is damage; edit_meta then reseals the checksum (a file
# some other writer made consistently) so the checks behind it are tested too.
edit_meta() {  # folder, key, value (JSON text of the new value, or null to delete the key) [noreseal]
  rm -rf "$1" && cp -r straight "$1" && /usr/bin/python3 - "$1/checkpoint.safetensors" "$2" "$3" <<'PY'
import json, struct, sys
path, key, value = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header["__metadata__"]
if "." in key:  # config.<key>
    cfg = json.loads(meta["config"])
    k = key.split(".", 1)[1]
    if value is None: cfg.pop(k, None)
    elif k == "*": cfg = value
    else: cfg[k] = value
    meta["config"] = json.dumps(cfg)
elif value is None: meta.pop(key, None)
else: meta[key] = value
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
PY
  [ "${4:-}" = noreseal ] || /usr/bin/python3 "$checksum_py" --reseal "$1/checkpoint.safetensors"
}
edit_meta edited_config config.norm_eps 1e-07 noreseal
check "an edited checkpoint config (one digit)" 2 "$ctgrad" eval gpt --run edited_config
expect_text "the checksum covers the metadata" "does not match its checksum"
edit_meta no_checksum ctgrad_checksum null noreseal
check "a checkpoint whose checksum was deleted" 2 "$ctgrad" eval gpt --run no_checksum
expect_text "a deleted checksum is damage" "no checksum in its metadata"
edit_meta future_format format '"ctgrad-training-999"'
check "a checkpoint of an unknown format" 2 "$ctgrad" eval gpt --run future_format
expect_text "names the format" "format 'ctgrad-training-999' is not one this version reads"
edit_meta no_hash tokenizer_hash null
check "a checkpoint naming its tokenizer without the hash" 2 "$ctgrad" eval gpt --run no_hash
edit_meta outside_tokenizer tokenizer '"../../../../etc/passwd"'
check "a tokenizer path outside the run folder" 2 "$ctgrad" eval gpt --run outside_tokenizer
expect_text "names the path" "not a file name of the run folder"
rm -rf fifo_run && mkdir fifo_run && mkfifo fifo_run/checkpoint.safetensors
check "a FIFO as the checkpoint (no hang)" 2 timeout 20 "$ctgrad" eval gpt --run fifo_run
expect_text "a FIFO is not a file" "not a regular file"
mkfifo fifo.json
check "a FIFO as --config (no hang)" 2 timeout 20 "$ctgrad" train gpt --run f --config fifo.json
check "a device as --config (bounded)" 2 timeout 20 "$ctgrad" train gpt --run f --config /dev/zero
check "a folder as --config" 2 "$ctgrad" train gpt --run f --config "$work"
printf '{"steps": 5}\0garbage' > nul.json
check "a config with a NUL byte" 2 "$ctgrad" train gpt --run f --config nul.json
expect_text "names the NUL" "NUL byte at offset 12"
printf '{"seed": 18446744073709551615}' > wrap.json
check "a seed past 2^63 does not wrap" 2 "$ctgrad" train gpt --run f --config wrap.json
expect_text "says out of range" "out of the 64-bit integer range"
printf '{"size": "t\\u0000iny"}' > nulstr.json
check "a NUL inside a config string" 2 "$ctgrad" train gpt --run f --config nulstr.json
expect_text "shows the NUL" "t\\x00iny"
printf '{"size": "tiny"}' > a.json
check "--config twice" 2 "$ctgrad" train gpt --run f --config a.json --config a.json
check "--run twice" 2 "$ctgrad" train gpt --run f --run g
check "no arguments" 2 "$ctgrad"
check "help with an extra argument" 2 "$ctgrad" help gpt extra
check "help shows flag types" 0 "$ctgrad" help gpt
expect_text "flags are true or false" "(true or false)"
check "a run folder name too long" 2 "$ctgrad" train gpt --run "$(printf 'x%.0s' {1..5000})" --set size=tiny
expect_text "the name is shortened" "(5000 bytes)"
check "a prompt outside the vocabulary" 2 "$ctgrad" sample gpt --run straight --prompt $'\x01\x02'
check "an empty text to translate" 2 "$ctgrad" translate transformer --run translate --text ""
rm -rf swapped_offsets && cp -r straight swapped_offsets && /usr/bin/python3 - swapped_offsets/checkpoint.safetensors <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
a, b = "h.0.ln_1.weight", "h.0.ln_1.bias"  # same shape: the file stays well-formed
h[a]["data_offsets"], h[b]["data_offsets"] = h[b]["data_offsets"], h[a]["data_offsets"]
s = json.dumps(h).encode()
s += b" " * ((8 - len(s) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(s)) + s + raw[8 + n:])
PY
check "two tensors' offsets swapped" 2 "$ctgrad" eval gpt --run swapped_offsets
expect_text "the checksum covers the tensor table" "tensor table or metadata does not match its checksum"
rm -rf loop_run && mkdir loop_run && ln -s checkpoint.safetensors loop_run/checkpoint.safetensors
check "a symlink loop as the checkpoint" 2 "$ctgrad" eval gpt --run loop_run
rm -rf loop_metrics && cp -r straight loop_metrics && rm loop_metrics/metrics.csv && ln -s metrics.csv loop_metrics/metrics.csv
check "a symlink loop as the metrics" 2 "$ctgrad" train gpt --run loop_metrics --resume "${common[@]}" --set steps=62
check "--config with an empty name" 2 "$ctgrad" train gpt --run f --config ''
check "an option before the command" 2 "$ctgrad" --threads 2
expect_text "says the order" "the command and the model come first"
rm -rf fifo_plot && cp -r straight fifo_plot && rm fifo_plot/loss.png && mkfifo fifo_plot/loss.png
check "a FIFO as the plot (no hang)" 0 timeout 120 "$ctgrad" train gpt --run fifo_plot --resume "${common[@]}" --set steps=62 --set sample_tokens=0
expect_text "says it is not drawn" "is not a regular file: not drawn"
check "attention heatmaps on the copy task" 2 "$ctgrad" eval transformer --run copy --attention-png copy/att
"$ctgrad" translate transformer --run translate --beam 1000 --text "Everything went without a hitch." > translate_term.txt 2>&1 &
pid=$!
sleep 1  # any moment is right: loading, or the (long) beam search
kill -TERM "$pid" 2>/dev/null
wait "$pid"
check "SIGTERM stops a translation (exit 130)" 0 test $? -eq 130
check "a context shorter than the sample prompt" 0 "$ctgrad" train gpt --run ctx2 --set size=tiny --set context=2 --set steps=2 --set eval_windows=2 --set sample_tokens=5 --threads 2
check "diverging before any checkpoint" 3 "$ctgrad" train gpt --run diverge0 --set size=tiny --set context=16 --set steps=5 --set init_std=1e30 --set sample_tokens=0 --threads 2
expect_text "says no checkpoint was saved" "no checkpoint was saved yet"
mkdir -p nockpt && cp straight/metrics.csv nockpt/
check "a folder with a run's files but no checkpoint" 2 "$ctgrad" train gpt --run nockpt --set size=tiny --set context=16
expect_text "suggests --overwrite" "without a checkpoint"
(ulimit -f 100; "$ctgrad" train gpt --run fsize --set size=tiny --set context=16 --set steps=5 --set eval_every=5 --set sample_tokens=0 --threads 2 > out_fsize.txt 2>&1; echo $? > rc_fsize.txt)
check "a file-size limit fails the save with a message (no SIGXFSZ)" 0 grep -q "File too large" out_fsize.txt
check "and exits 1" 0 grep -qx 1 rc_fsize.txt
check "and leaves no temporary file" 1 sh -c 'ls -A fsize | grep -q tmp'

edit_meta huge_batch config.batch 1152921504606846976
check "a checkpoint config with a huge batch" 2 "$ctgrad" eval gpt --run huge_batch
expect_text "names the key" "config key 'batch'"
edit_meta no_size config.size null
check "a checkpoint config without its size" 2 "$ctgrad" eval gpt --run no_size
expect_text "names the missing key" "lacks 'size'"
edit_meta no_steps config.steps null
check "a checkpoint config without steps" 0 "$ctgrad" eval gpt --run no_steps
expect_text "the default is said out loud" "does not state steps=2000: using the default"
edit_meta no_norm config.norm null
check "a run trained before the architecture keys existed" 0 "$ctgrad" eval gpt --run no_norm
expect_text "has the defaults, said out loud" "does not state norm=pre: using the default"
edit_meta empty_config "config.*" "{}"
check "an empty checkpoint config" 2 "$ctgrad" sample gpt --run empty_config
edit_meta negative_step optimizer_step '"-1"'
check "optimizer_step -1" 2 "$ctgrad" train gpt --run negative_step --resume
expect_text "names the metadata" "metadata 'optimizer_step' is not a count"
check "a huge batch" 2 "$ctgrad" train gpt --run huge --set size=tiny --set context=16 --set batch=1152921504606846976
check "a transformer batch that overflowed" 2 "$ctgrad" train transformer --run huge --set batch=4611686018427387904
check "batch 0" 2 "$ctgrad" train gpt --run zero --set batch=0
check "a batch the memory cannot hold" 2 "$ctgrad" train gpt --run big --set size=medium --set batch=65536 --set context=256
expect_text "says what it needs" "available"
check "beta2 -1" 2 "$ctgrad" train gpt --run b --set beta2=-1
check "lr 1e30" 2 "$ctgrad" train gpt --run b --set lr=1e30
check "lr -1" 2 "$ctgrad" train gpt --run b --set lr=-1
check "clip -1" 2 "$ctgrad" train gpt --run b --set clip=-1
check "warmup -5" 2 "$ctgrad" train gpt --run b --set warmup=-5
check "weight decay -10" 2 "$ctgrad" train gpt --run b --set weight_decay=-10
check "dropout 1.5 (refused by op dropout)" 2 "$ctgrad" train gpt --run b --set dropout=1.5
expect_text "names the op" "op dropout"
check "trailing junk in a number" 2 "$ctgrad" sample gpt --run straight --seed 1e5
check "trailing junk in a count" 2 "$ctgrad" sample gpt --run straight --tokens 5xyz
printf '[1, 2]' > array.json
check "a config that is not an object" 2 "$ctgrad" train gpt --config array.json
expect_text "says what it must be" "must be a JSON object"
/usr/bin/python3 -c 'print("[" * 100000 + "]" * 100000)' > deep.json
check "a config nested 100,000 deep" 2 "$ctgrad" train gpt --config deep.json
expect_text "names the depth" "nests deeper than 64"
check "resume and overwrite together" 2 "$ctgrad" train gpt --run straight --resume --overwrite
dead=$(for p in $(seq 30000 -1 300); do [ -e /proc/$p ] || { echo $p; break; }; done)  # a pid no process has
rm -rf stale && cp -r straight stale && printf 'half' > "stale/.checkpoint.safetensors.tmp.$dead.0"
check "eval removes a dead writer's temporary file" 0 "$ctgrad" eval gpt --run stale --set eval_windows=4
check "the temporary file is gone" 1 test -e "stale/.checkpoint.safetensors.tmp.$dead.0"

# No message anywhere above says "ctgrad: ctgrad:".
cp all.txt every_output.txt
check "no doubled prefix in any message" 1 grep -q "ctgrad: ctgrad:" every_output.txt
echo "$pass passed, $fail failed"

[ "$fail" -eq 0 ]
