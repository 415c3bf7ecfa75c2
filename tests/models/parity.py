"""Parity with PyTorch (as llm.c's test_gpt2): the weights ctgrad saved are loaded into the PyTorch
reference model (bench/reference/gpt.py, transformer.py, bert.py or t5.py); on the same batch, in fp32:
  loss within 1e-4 relative, every parameter gradient within 1e-4 relative (max |diff| over the
  tensor / max |reference| over the tensor), logits within 1e-5 (max |diff|).
A gradient that is zero in exact arithmetic (the key-projection biases: softmax ignores a constant
added to a row of scores) is rounding noise in both; its scale is floored at 1e-3 of the largest
gradient entry of the model.
T5 also: the relative-position bucket of every distance -300..300, both directions, equal to the
reference's bucket function (Hugging Face's).
Llama: 4 query heads over 2 key/value heads with half-split RoPE (llama); over 1, with GPT-J's
interleaved RoPE, QK-norm and a window of 5 (llama-mqa); a mixture of 4 experts, top-2 (llama-moe)
and top-1 (llama-moe-top1), at capacities that drop choices: also the cross-entropy, the balance
and z-loss terms within 1e-4 relative and the dropped fraction exactly.
GRU and LSTM (rnn.py): nn.GRU / nn.LSTM, 2 layers, bidirectional, over a padded batch (packed
sequences): also every final state h_n (c_n) within 1e-5. Bahdanau's encoder-decoder (seq2seq.py, d2l
11.4) over padded sources and targets: also the attention weights within 1e-5.
usage: /usr/bin/python3 parity.py gpt|transformer|bert|bert-nsp|t5|t5-tied|llama|llama-mqa|llama-moe|llama-moe-top1|gru|lstm|seq2seq <writer program> <out.safetensors>
(t5-tied: the T5 writer with --tied, v1.0's output tied to the shared embedding)
(bert-nsp: the BERT writer with --next-sentence, the pretraining graph with next-sentence prediction)"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "reference"))
import torch  # noqa: E402
from gpt import Gpt, read_safetensors  # noqa: E402
from transformer import Transformer  # noqa: E402
from bert import BertMlm  # noqa: E402
from t5 import T5, relative_position_bucket  # noqa: E402
from llama import Llama  # noqa: E402
from rnn import RnnTagger  # noqa: E402
from seq2seq import Seq2Seq  # noqa: E402

kind, writer, path = sys.argv[1:4]
subprocess.run([writer, path] + {"bert-nsp": ["--next-sentence"], "t5-tied": ["--tied"], "llama-mqa": ["--mqa"], "llama-moe": ["--moe"],
                         "llama-moe-top1": ["--moe-top1"], "lstm": ["--lstm"]}.get(kind, []), check=True)
t, meta = read_safetensors(path)
cfg = json.loads(meta["config"])
torch.manual_seed(0)
if kind.startswith("llama"):
    model = Llama(cfg)
elif kind == "seq2seq":
    model = Seq2Seq(cfg["vocab"], cfg["embed"], cfg["hidden"], cfg["layers"])
elif kind in ("gru", "lstm"):
    model = RnnTagger(kind, cfg["vocab"], cfg["d"], cfg["hidden"], cfg["layers"], cfg["bidirectional"])
elif kind == "gpt":
    model = Gpt(cfg["vocab"], cfg["n_layer"], cfg["n_head"], cfg["d_model"], cfg["context"])
elif kind in ("bert", "bert-nsp"):
    model = BertMlm(cfg["vocab"], cfg["n_layer"], cfg["heads"], cfg["d_model"], cfg["d_ff"], cfg["context"], dropout=0.0,
                    next_sentence=kind == "bert-nsp")
elif kind in ("t5", "t5-tied"):
    model = T5(cfg["vocab"], cfg["n_layer"], cfg["n_dec_layer"], cfg["d_model"], cfg["heads"], cfg["d_ff"], cfg["buckets"], cfg["max_distance"],
               tied=cfg["tied"], dropout=0.0, label_smoothing=cfg["label_smoothing"])
else:
    model = Transformer(cfg["vocab"], cfg["n_layer"], cfg["d_model"], cfg["heads"], cfg["d_ff"], cfg["label_smoothing"], cfg["pad"])
state = {k: torch.from_numpy(v) for k, v in t.items() if not k.startswith(("grad.", "out.", "in."))}
missing = set(model.state_dict()) ^ set(state)
if missing:
    sys.exit(f"parameter names differ between ctgrad and the reference: {sorted(missing)}")
model.load_state_dict(state)
inputs = {k[3:]: torch.from_numpy(v).long() for k, v in t.items() if k.startswith("in.")}
if kind == "gpt" or kind.startswith("llama"):
    logits, loss = model(inputs["ids"], inputs["targets"])
elif kind in ("gru", "lstm"):
    logits, loss = model(inputs["ids"], inputs["mask"], inputs["targets"])
elif kind == "seq2seq":
    logits, loss = model(inputs["src"], inputs["src_len"], inputs["tgt_in"], inputs["tgt_len"], inputs["tgt_out"])
elif kind in ("bert", "bert-nsp"):
    logits, loss = model(inputs["ids"], inputs["segments"], inputs["lengths"], inputs["picks"], inputs["targets"], inputs.get("labels"))
elif kind in ("t5", "t5-tied"):
    logits, loss = model(inputs["src"], inputs["src_len"], inputs["tgt_in"], inputs["tgt_out"])
else:
    logits, loss = model(inputs["src"], inputs["src_len"], inputs["tgt_in"], inputs["tgt_len"], inputs["tgt_out"])
loss.backward()

fails, report = 0, []
def check(what, got, want, tol, relative, floor=0.0):
    global fails
    diff = (torch.as_tensor(got).double() - want.detach().double()).abs().max().item()
    scale = max(want.detach().double().abs().max().item(), floor) if relative else 1.0
    err = diff / max(scale, 1e-30)
    ok = err <= tol
    fails += not ok
    report.append(f"{'ok  ' if ok else 'FAIL'} {what}: {'relative' if relative else 'absolute'} error {err:.2e} (tolerance {tol:g})")

check("loss", t["out.loss"][0], loss, 1e-4, True)
check("logits", t["out.logits"], logits, 1e-5, False)
if kind in ("t5", "t5-tied"):
    for direction in ("bidirectional", "causal"):
        want = relative_position_bucket(inputs["distances"], direction == "bidirectional", 32, 128)
        differ = (want != inputs["buckets_" + direction]).sum().item()
        fails += differ != 0
        report.append(f"{'ok  ' if differ == 0 else 'FAIL'} {direction} buckets of distances -300..300: {differ} differ")
if kind.startswith("llama-moe"):
    check("cross-entropy", t["out.ce"].reshape(-1)[0], model.ce, 1e-4, True)
    check("balance loss", t["out.moe.balance"].reshape(-1)[0], model.balance, 1e-4, True)
    check("z-loss", t["out.moe.z"].reshape(-1)[0], model.z, 1e-4, True)
    check("dropped fraction", t["out.moe.dropped"].reshape(-1)[0], torch.tensor(model.dropped), 1e-6, False)
    fails += not (0 < model.dropped < 1)
    report.append(f"{'ok  ' if 0 < model.dropped < 1 else 'FAIL'} choices dropped over capacity: {model.dropped:.3f} of them")
if kind in ("gru", "lstm"):
    for k in range(model.h_n.shape[0]):
        check(f"h_n[{k}]", t[f"out.h.{k}"], model.h_n[k], 1e-5, False)
        if kind == "lstm":
            check(f"c_n[{k}]", t[f"out.c.{k}"], model.c_n[k], 1e-5, False)
if kind == "seq2seq":
    check("attention weights", t["out.attention"], model.attention, 1e-5, False)
if kind == "bert-nsp":
    check("next-sentence logits", t["out.nsp_logits"], model.nsp_logits, 1e-5, False)
largest = max(p.grad.abs().max().item() for p in model.parameters())
for name, p in model.named_parameters():
    check(f"grad {name}", t["grad." + name], p.grad, 1e-4, True, 1e-3 * largest)
print("\n".join(report))
print(f"loss ctgrad {t['out.loss'][0]:.6f} torch {loss.item():.6f}; logits max |x| {logits.abs().max().item():.2f}")
n = len(report)
print(f"{n - fails} passed, {fails} failed")
sys.exit(1 if fails else 0)
