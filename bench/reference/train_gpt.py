"""nanoGPT's "baby GPT" CPU recipe in PyTorch, on the same KJV text, split, vocabulary, schedule and
validation windows as `ctgrad train gpt` (its default config): the side-by-side reference for
docs/models/gpt.md. Debian python3-torch; run with Debian's own interpreter:
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/reference/train_gpt.py [--steps 2000] [--threads 2]
Prints one JSON object per evaluation: step, val_loss (nats/char), train_seconds (evaluation excluded)."""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import Gpt  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=2000)
p.add_argument("--eval-every", type=int, default=500)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--seed", type=int, default=1)
args = p.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)

# The text as ctgrad's data::kjv_text(): verse lines "  <n> <text>" of /usr/bin/bible, one per line.
raw = subprocess.run(["/usr/bin/bible", "-l", "100000", "gen1:1-rev22:21"], check=True, capture_output=True).stdout
lines = []
for line in raw.split(b"\n"):
    s = line.lstrip(b" ")
    digits = len(s) - len(s.lstrip(b"0123456789"))
    if len(s) < len(line) and digits > 0 and len(s) > digits and s[digits:digits + 1] == b" ":
        lines.append(s[digits + 1:])
text = b"".join(l + b"\n" for l in lines)
cut = text.find(b"\n", int(len(text) * 0.9)) + 1  # data::split_text: first 90% (at a line break)
train_text, val_text = text[:cut], text[cut:]
chars = sorted(set(train_text))  # data::CharTokenizer: byte values in order
index = {c: i for i, c in enumerate(chars)}
train = torch.tensor([index[c] for c in train_text], dtype=torch.long)
val = torch.tensor([index[c] for c in val_text], dtype=torch.long)

V, L, H, D, T, B = 256, 4, 4, 128, 64, 12  # vocabulary padded to 256 as ctgrad's preset `small`
lr, min_lr, warmup = 1e-3, 1e-4, 100
model = Gpt(V, L, H, D, T)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=lr, betas=(0.9, 0.99), eps=1e-8)


def lr_at(t):  # optim::warmup_cosine, steps counted from 1
    if t <= warmup:
        return lr * t / warmup
    if t >= args.steps:
        return min_lr
    progress = (t - warmup) / (args.steps - warmup)
    return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


@torch.no_grad()
def validation_loss():  # consecutive windows of T over the whole split, every position once
    model.eval()
    windows = (len(val) - 1) // T
    total = 0.0
    for w0 in range(0, windows, B):
        n = min(B, windows - w0)
        x = torch.stack([val[(w0 + b) * T:(w0 + b) * T + T] for b in range(n)])
        y = torch.stack([val[(w0 + b) * T + 1:(w0 + b) * T + T + 1] for b in range(n)])
        total += model(x, y)[1].item() * n
    model.train()
    return total / windows


print(json.dumps({"params": sum(p.numel() for p in model.parameters()), "train_chars": len(train), "val_chars": len(val),
                  "vocab": len(chars), "threads": torch.get_num_threads(), "torch": torch.__version__}), flush=True)
train_seconds, start = 0.0, time.time()
for step in range(1, args.steps + 1):
    t0 = time.time()
    ix = torch.randint(len(train) - T, (B,))
    x = torch.stack([train[i:i + T] for i in ix])
    y = torch.stack([train[i + 1:i + T + 1] for i in ix])
    _, loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    for g in opt.param_groups:
        g["lr"] = lr_at(step)
    opt.step()
    train_seconds += time.time() - t0
    if step % args.eval_every == 0 or step == args.steps:
        print(json.dumps({"step": step, "loss": loss.item(), "val_loss": validation_loss(), "train_seconds": train_seconds,
                          "tokens_per_s": step * B * T / train_seconds}), flush=True)
print(json.dumps({"wall_seconds": time.time() - start}), flush=True)
