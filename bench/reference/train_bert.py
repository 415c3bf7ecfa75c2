"""`ctgrad train bert`'s recipe in PyTorch, on exactly the batches ctgrad trains and validates on
(`ctgrad export-batches bert` writes them: same tokens, packing and masks): the side-by-side
reference for docs/models/bert.md. Debian python3-torch; run with Debian's own interpreter:
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/reference/train_bert.py BATCHES.safetensors [--eval-every 250]
The recipe (the ctgrad defaults, read from the file's config): AdamW (0.9, 0.999, 1e-8), weight
decay 0.01 except biases and norms, linear warm-up then linear decay to 0, global norm clip 1.0,
dropout 0.1, BERT's truncated-normal init. Prints one JSON object per evaluation: step,
val_loss (nats per masked token), val_accuracy, train_seconds (evaluation excluded)."""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert import BertMlm, bert_init  # noqa: E402
from gpt import read_safetensors  # noqa: E402

PRESETS = {  # models/bert.hpp: vocab, n_layer, heads, d_model, d_ff, context
    "tiny": (512, 2, 2, 32, 64, 32),
    "small": (8000, 4, 4, 256, 1024, 128),
    "base": (30522, 12, 12, 768, 3072, 512),
}

p = argparse.ArgumentParser()
p.add_argument("batches")
p.add_argument("--eval-every", type=int, default=0, help="default: the config's eval_every")
p.add_argument("--threads", type=int, default=2)
p.add_argument("--seed", type=int, default=1)
args = p.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)

t, meta = read_safetensors(args.batches)
cfg = json.loads(meta["config"])
vocab_used = int(meta["vocab"])
steps = t["train.rows"].shape[0]  # exported; the schedule's horizon is the run's own steps
horizon = cfg["steps"]
eval_every = args.eval_every or cfg["eval_every"]
lr, warmup, wd, clip = cfg["lr"], cfg["warmup"], cfg["weight_decay"], cfg["clip"]
V, L, H, D, F, C = PRESETS[cfg["size"]]
model = BertMlm(V, L, H, D, F, C, dropout=cfg.get("dropout", 0.1), eps=cfg.get("norm_eps", 1e-12),
                label_smoothing=cfg.get("label_smoothing", 0.0))
bert_init(model, cfg.get("init_std", 0.02))
decay = [q for n, q in model.named_parameters() if q.dim() >= 2]
no_decay = [q for n, q in model.named_parameters() if q.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=lr, betas=(0.9, 0.999), eps=1e-8)


def lr_at(s):  # optim::warmup_linear, steps counted from 1, to 0 at the last step
    if s <= warmup:
        return lr * s / max(warmup, 1)
    return lr * max(0.0, (horizon - s) / max(horizon - warmup, 1))


def batch(split, k):
    rows = int(t[split + ".rows"][k])
    ids = torch.from_numpy(t[split + ".ids"][k, :rows]).long()
    lengths = torch.from_numpy(t[split + ".lengths"][k, :rows]).long()
    a, b = t[split + ".offsets"][k], t[split + ".offsets"][k + 1]
    picks = torch.from_numpy(t[split + ".picks"][a:b]).long()
    targets = torch.from_numpy(t[split + ".targets"][a:b]).long()
    return ids, torch.zeros_like(ids), lengths, picks, targets


@torch.no_grad()
def validate():
    model.eval()
    loss, right, n = 0.0, 0, 0
    for k in range(t["val.rows"].shape[0]):
        ids, seg, lengths, picks, targets = batch("val", k)
        logits, l = model(ids, seg, lengths, picks, targets)
        loss += l.item() * len(targets)
        right += (logits[:, :vocab_used].argmax(-1) == targets).sum().item()
        n += len(targets)
    model.train()
    return loss / n, right / n


print(json.dumps({"params": sum(q.numel() for q in model.parameters()), "steps": steps, "threads": torch.get_num_threads(),
                  "torch": torch.__version__}), flush=True)
train_seconds, start, tokens = 0.0, time.time(), 0
model.train()
for step in range(1, steps + 1):
    t0 = time.time()
    ids, seg, lengths, picks, targets = batch("train", step - 1)
    _, loss = model(ids, seg, lengths, picks, targets)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for g in opt.param_groups:
        g["lr"] = lr_at(step)
    opt.step()
    train_seconds += time.time() - t0
    tokens += int(lengths.sum())
    if step % eval_every == 0 or step == steps:
        vl, va = validate()
        print(json.dumps({"step": step, "loss": loss.item(), "val_loss": vl, "val_accuracy": va, "train_seconds": train_seconds,
                          "tokens_per_s": tokens / train_seconds}), flush=True)
print(json.dumps({"wall_seconds": time.time() - start}), flush=True)
