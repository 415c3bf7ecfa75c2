"""`ctgrad train transformer`'s recipe in PyTorch, on exactly the batches ctgrad trains and validates
on (`ctgrad export-batches transformer` writes them), then beam search on the same test sources:
the anchor of docs/models/transformer.md. Debian python3-torch; run with Debian's own interpreter:
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/reference/train_transformer.py BATCHES.safetensors HYPS.ids \\
        [--minutes M] [--eval-every 500] [--beam 4] [--alpha 0.6] [--max-len 64]
The recipe (read from the file's config): the paper's Adam (0.9, 0.98, 1e-9) with the Noam schedule
(factor, warm-up), label smoothing and dropout as configured, no clipping; ctgrad's init (embedding
N(0, d^-1/2), linear layers Xavier-uniform, biases 0). Trains the exported steps, or stops at the
wall-clock budget --minutes (training time, evaluation excluded). Prints one JSON object per
validation (step, val_loss in nats per target token, train_seconds), then decodes every test
source with the GNMT beam search ctgrad uses (models/beam_search.cpp: length penalty
((5 + |Y|) / 6)^alpha, the best `beam` finished hypotheses kept, stop when no live one can beat
them) and writes the token ids of each translation, one line each, to HYPS.ids; score them with
bench/transformer_anchor.sh (spm_decode, then ctgrad-bleu against the exported references)."""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import read_safetensors  # noqa: E402
from transformer import Transformer  # noqa: E402

PRESETS = {"small": (3, 256, 4, 1024), "base": (6, 512, 8, 2048)}  # n_layer, d_model, heads, d_ff
BOS, EOS, PAD = 2, 3, 0


def batches(t, name):
    shapes = t[name + ".shapes"]
    at = {f: 0 for f in ("src", "src_len", "tgt_in", "tgt_out", "tgt_len")}
    out = []
    for B, S, T in shapes:
        def take(f, n):
            v = t[name + "." + f][at[f]:at[f] + n]
            at[f] += n
            return torch.from_numpy(v.astype("int64"))
        out.append((take("src", B * S).view(B, S), take("src_len", B), take("tgt_in", B * T).view(B, T), take("tgt_len", B),
                    take("tgt_out", B * T).view(B, T)))
    return out


@torch.no_grad()
def validation_loss(model, val):
    model.eval()
    total, n = 0.0, 0
    for src, src_len, tgt_in, tgt_len, tgt_out in val:
        logits, _ = model(src, src_len, tgt_in, tgt_len)
        lp = torch.log_softmax(logits.double(), dim=-1)
        keep = tgt_out != PAD
        total += -lp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)[keep].sum().item()
        n += keep.sum().item()
    model.train()
    return total / n


@torch.no_grad()
def beam_search(model, src, beam, alpha, max_len):
    """models/beam_search.cpp for one sentence, the decoder re-run over each prefix."""
    memory, keep = model.encode(src[None, :], torch.tensor([len(src)]))
    penalty = lambda n: ((5.0 + n) / 6.0) ** alpha  # noqa: E731
    alive, done = [([BOS], 0.0)], []
    for _ in range(max_len):
        if not alive:
            break
        k = len(alive)
        tgt = torch.tensor([h[0] for h in alive])
        logits = model.decode(memory.expand(k, -1, -1), keep.expand(k, -1, -1, -1), tgt, torch.full((k,), tgt.shape[1]))
        lp = torch.log_softmax(logits[:, -1].double(), dim=-1)
        V = lp.shape[1]
        scores = (torch.tensor([h[1] for h in alive], dtype=torch.float64)[:, None] + lp).flatten()
        top = torch.topk(scores, min(2 * beam, scores.numel()))
        cand = sorted(((sc.item(), int(i) // V, int(i) % V) for sc, i in zip(top.values, top.indices)), key=lambda c: (-c[0], c[1], c[2]))
        nxt = []
        for score, b, v in cand:
            if len(nxt) >= beam:
                break
            tokens = alive[b][0] + [v]
            if v == EOS:
                if len(done) < beam:
                    done.append((tokens, score))
                else:
                    worst = min(range(len(done)), key=lambda i: done[i][1] / penalty(len(done[i][0]) - 1))
                    if score / penalty(len(tokens) - 1) > done[worst][1] / penalty(len(done[worst][0]) - 1):
                        done[worst] = (tokens, score)
            else:
                nxt.append((tokens, score))
        if len(done) >= beam and nxt:
            best_done = max(h[1] / penalty(len(h[0]) - 1) for h in done)
            if nxt[0][1] / penalty(max_len) <= best_done:
                nxt = []
        alive = nxt
    done += alive
    best = max(done, key=lambda h: h[1] / penalty(len(h[0]) - 1))[0][1:]
    return best[:-1] if best and best[-1] == EOS else best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("batches")
    ap.add_argument("hyps")
    ap.add_argument("--minutes", type=float, default=0.0, help="training time budget (0: every exported step)")
    ap.add_argument("--eval-every", type=int, default=0, help="0: the run's eval_every")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=0.6)
    ap.add_argument("--max-len", type=int, default=0, help="0: the run's max_len")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--average", type=int, default=0,
                    help="decode the mean of the last K validation points' weights (ctgrad average-checkpoints; 0: the last weights)")
    ap.add_argument("--test-limit", type=int, default=0, help="decode only the first N test sources (0: all)")
    a = ap.parse_args()
    t, meta = read_safetensors(a.batches)
    cfg = json.loads(meta["config"])
    n_layer, d, heads, d_ff = PRESETS[cfg["size"]]
    vocab = int(meta["vocab"])
    torch.manual_seed(a.seed)
    model = Transformer(vocab, n_layer, d, heads, d_ff, label_smoothing=cfg["label_smoothing"], pad=PAD, dropout=cfg["dropout"])
    nn.init.normal_(model.emb.weight, 0.0, d ** -0.5)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    noam = lambda s: cfg["lr_factor"] * d ** -0.5 * min(max(s, 1) ** -0.5, s * cfg["warmup"] ** -1.5)  # noqa: E731
    train, val = batches(t, "train"), batches(t, "val")
    every = a.eval_every or cfg["eval_every"]
    trained = 0.0
    kept = []  # the last --average snapshots, taken at the validation points like ctgrad's kept checkpoints
    model.train()
    for step, (src, src_len, tgt_in, tgt_len, tgt_out) in enumerate(train, start=1):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = noam(step)
        _, loss = model(src, src_len, tgt_in, tgt_len, tgt_out)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        trained += time.perf_counter() - t0
        out_of_time = a.minutes > 0 and trained >= 60 * a.minutes
        if step % every == 0 or step == len(train) or out_of_time:
            print(json.dumps({"step": step, "val_loss": round(validation_loss(model, val), 4), "train_seconds": round(trained, 1)}), flush=True)
            if a.average > 0:
                kept = (kept + [{k: v.detach().double().clone() for k, v in model.state_dict().items()}])[-a.average:]
        if out_of_time:
            break
    if len(kept) > 1:
        model.load_state_dict({k: (sum(s[k] for s in kept) / len(kept)).to(v.dtype) for k, v in model.state_dict().items()})
        print(json.dumps({"averaged": len(kept), "val_loss": round(validation_loss(model, val), 4)}), flush=True)
    model.eval()
    src_all, offsets = t["test.src"], t["test.offsets"]
    max_len = a.max_len or cfg["max_len"]
    t0 = time.perf_counter()
    n_test = len(offsets) - 1 if a.test_limit <= 0 else min(a.test_limit, len(offsets) - 1)
    with open(a.hyps, "w") as f:
        for i in range(n_test):
            src = torch.from_numpy(src_all[offsets[i]:offsets[i + 1]].astype("int64"))
            f.write(" ".join(str(x) for x in beam_search(model, src, a.beam, a.alpha, max_len)) + "\n")
    print(json.dumps({"decoded": n_test, "beam": a.beam, "alpha": a.alpha, "seconds": round(time.perf_counter() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
