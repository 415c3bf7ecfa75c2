"""`ctgrad train t5`'s recipe in PyTorch, on exactly the batches ctgrad trains and validates on
(`ctgrad export-batches t5` writes them: same tokens, packing and span corruption): the side-by-side
reference for docs/models/t5.md. Debian python3-torch; run with Debian's own interpreter:
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/reference/train_t5.py BATCHES.safetensors [--eval-every 250]
The recipe (read from the file's config): Adafactor as Shazeer & Stern / Hugging Face's
transformers.optimization.Adafactor (factored second moments, beta2_t = 1 - t^-0.8, eps 1e-30,
update clipping 1.0, step scaled by max(1e-3, RMS(w)), no first moment), T5's schedule: lr held
for k steps then lr sqrt(k / t); or AdamW with linear warm-up and decay. Dropout and label
smoothing from the config, T5's init (bench/reference/t5.py). PyTorch 1.13 has no Adafactor, so it
is written out below. Prints one JSON object per evaluation: step, val_loss (nats per target
token), val_accuracy, train_seconds (evaluation excluded)."""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import read_safetensors  # noqa: E402
from t5 import T5  # noqa: E402

PRESETS = {  # models/t5.hpp: vocab, n_layer, n_dec_layer, d_model, heads, d_ff
    "tiny": (500, 2, 2, 32, 2, 64),
    "small": (8100, 4, 4, 256, 4, 1024),
    "t5-small": (32100, 6, 6, 512, 8, 2048),
}


class Adafactor(torch.optim.Optimizer):
    """transformers.optimization.Adafactor with relative_step=False, scale_parameter=True, beta1=None."""

    def __init__(self, params, lr, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, eps=eps, clip_threshold=clip_threshold, decay_rate=decay_rate, weight_decay=weight_decay))

    @staticmethod
    def _rms(x):
        return x.norm(2) / (x.numel() ** 0.5)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g, state = p.grad, self.state[p]
                factored = g.dim() >= 2
                if not state:
                    state["step"] = 0
                    if factored:
                        state["row"] = torch.zeros(g.shape[:-1])
                        state["col"] = torch.zeros(g.shape[:-2] + g.shape[-1:])
                    else:
                        state["sq"] = torch.zeros_like(g)
                state["step"] += 1
                lr = group["lr"] * max(group["eps"][1], self._rms(p).item())
                beta2t = 1.0 - math.pow(state["step"], group["decay_rate"])
                update = g * g + group["eps"][0]
                if factored:
                    state["row"].mul_(beta2t).add_(update.mean(dim=-1), alpha=1 - beta2t)
                    state["col"].mul_(beta2t).add_(update.mean(dim=-2), alpha=1 - beta2t)
                    r = (state["row"] / state["row"].mean(dim=-1, keepdim=True)).rsqrt().unsqueeze(-1)
                    update = r * state["col"].unsqueeze(-2).rsqrt() * g
                else:
                    state["sq"].mul_(beta2t).add_(update, alpha=1 - beta2t)
                    update = state["sq"].rsqrt() * g
                update.div_((self._rms(update) / group["clip_threshold"]).clamp_(min=1.0))
                if group["weight_decay"] != 0:
                    p.add_(p, alpha=-group["weight_decay"] * lr)
                p.add_(update, alpha=-lr)


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
steps = t["train.rows"].shape[0]
horizon = cfg["steps"]
eval_every = args.eval_every or cfg["eval_every"]
V, L, LD, D, H, F = PRESETS[cfg["size"]]
model = T5(V, L, LD, D, H, F, tied=cfg["tied"], dropout=cfg.get("dropout", 0.0), eps=cfg.get("norm_eps", 1e-6),
           label_smoothing=cfg.get("label_smoothing", 0.0))
decay = [q for n, q in model.named_parameters() if q.dim() >= 2 and "rel_bias" not in n]
no_decay = [q for n, q in model.named_parameters() if not (q.dim() >= 2 and "rel_bias" not in n)]
wd = cfg["weight_decay"]
groups = [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]
adafactor = cfg["optimizer"] == "adafactor"
lr = cfg["lr"] if cfg["lr"] > 0 else (1e-2 if adafactor else 1e-3)
k = cfg["warmup"] if cfg["warmup"] > 0 else (10000 if adafactor else max(1, horizon // 10))
opt = Adafactor(groups, lr=lr) if adafactor else torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8)


def lr_at(s):  # apps/tasks/t5_common.hpp's schedule(c, 10000)
    if adafactor:
        return lr * math.sqrt(k) / math.sqrt(max(s, k))
    if s <= k:
        return lr * s / k
    return lr * max(0.0, (horizon - s) / max(horizon - k, 1))


def batch(split, i):
    rows = int(t[split + ".rows"][i])
    get = lambda name: torch.from_numpy(t[f"{split}.{name}"][i, :rows]).long()  # noqa: E731
    return get("src"), get("src_len"), get("tgt_in"), get("tgt_out")


@torch.no_grad()
def validate():
    model.eval()
    loss, right, n = 0.0, 0, 0
    for i in range(t["val.rows"].shape[0]):
        src, src_len, tgt_in, tgt_out = batch("val", i)
        logits, _ = model(src, src_len, tgt_in, tgt_out)
        real = tgt_out != 0
        logp = torch.log_softmax(logits.double(), -1)
        loss -= logp.gather(-1, tgt_out[..., None])[..., 0][real].sum().item()
        right += (logits.argmax(-1) == tgt_out)[real].sum().item()
        n += real.sum().item()
    model.train()
    return loss / n, right / n


print(json.dumps({"params": sum(q.numel() for q in model.parameters()), "steps": steps, "threads": torch.get_num_threads(),
                  "torch": torch.__version__, "optimizer": cfg["optimizer"]}), flush=True)
train_seconds, start, tokens = 0.0, time.time(), 0
model.train()
for step in range(1, steps + 1):
    t0 = time.time()
    src, src_len, tgt_in, tgt_out = batch("train", step - 1)
    _, loss = model(src, src_len, tgt_in, tgt_out)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if cfg["clip"] > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"])
    for g in opt.param_groups:
        g["lr"] = lr_at(step)
    opt.step()
    train_seconds += time.time() - t0
    tokens += int(src_len.sum()) + int((tgt_out != 0).sum())
    if step % eval_every == 0 or step == steps:
        vl, va = validate()
        print(json.dumps({"step": step, "loss": loss.item(), "val_loss": vl, "val_accuracy": va, "train_seconds": train_seconds,
                          "tokens_per_s": tokens / train_seconds}), flush=True)
print(json.dumps({"wall_seconds": time.time() - start}), flush=True)
