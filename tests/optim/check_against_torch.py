"""Replays optim_trace's runs with PyTorch (SGD, Adam, AdamW, clipping, parameter groups) and with
NumPy transcriptions of the papers' equations (Adafactor: Shazeer & Stern 2018; LAMB: You et al.
2019), in float64, and compares every parameter after every step. Run with Debian's python3."""
import json
import math
import subprocess
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
trace = [json.loads(l) for l in subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout.splitlines()]

x = np.array([math.sin(0.7 * i + 0.3) for i in range(20)]).reshape(5, 4)
y = np.array([math.cos(1.3 * i) for i in range(15)]).reshape(5, 3)
w0 = np.array([0.1 * (i % 4) - 0.07 * (i // 4) + 0.05 for i in range(12)]).reshape(3, 4)
b0 = np.array([0.02 * i - 0.01 for i in range(3)])


def grads(w, b):
    """Gradient of mean((x w^T + b - y)^2)."""
    r = x @ w.T + b - y
    g = 2 * r / r.size
    return g.T @ x, g.sum(0)


def torch_run(make_opt, clip=None):
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    opt = make_opt(w, b)
    out = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((torch.tensor(x) @ w.T + b - torch.tensor(y)) ** 2).mean()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_([w, b], clip)
        opt.step()
        out.append((w.detach().numpy().copy(), b.detach().numpy().copy()))
    return out


def adafactor_run():
    params = [w0.copy(), b0.copy()]
    state = [dict(r=np.zeros(3), c=np.zeros(4)), dict(v=np.zeros(3))]
    out = []
    for t in range(1, 6):
        gs = grads(params[0], params[1])
        beta2 = 1 - t ** -0.8
        for k, (p, g) in enumerate(zip(params, gs)):
            lr = min(1e-2, 1 / math.sqrt(t)) * max(1e-3, math.sqrt((p ** 2).mean()))
            g2 = g ** 2 + 1e-30
            if p.ndim == 2:
                s = state[k]
                s["r"] = beta2 * s["r"] + (1 - beta2) * g2.mean(1)
                s["c"] = beta2 * s["c"] + (1 - beta2) * g2.mean(0)
                vhat = np.outer(s["r"], s["c"]) / s["r"].mean()
            else:
                state[k]["v"] = beta2 * state[k]["v"] + (1 - beta2) * g2
                vhat = state[k]["v"]
            u = g / np.sqrt(vhat)
            u /= max(1.0, math.sqrt((u ** 2).mean()) / 1.0)
            p -= lr * u
        out.append((params[0].copy(), params[1].copy()))
    return out


def lamb_run(lr=0.01, wd=0.01, b1=0.9, b2=0.999, eps=1e-6):
    params = [w0.copy(), b0.copy()]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    out = []
    for t in range(1, 6):
        gs = grads(params[0], params[1])
        for k, g in enumerate(gs):
            m[k] = b1 * m[k] + (1 - b1) * g
            v[k] = b2 * v[k] + (1 - b2) * g * g
            r = (m[k] / (1 - b1 ** t)) / (np.sqrt(v[k] / (1 - b2 ** t)) + eps) + wd * params[k]
            wn, rn = np.linalg.norm(params[k]), np.linalg.norm(r)
            params[k] = params[k] - lr * (wn / rn if wn > 0 and rn > 0 else 1.0) * r
        out.append((params[0].copy(), params[1].copy()))
    return out


references = {
    "sgd": torch_run(lambda w, b: torch.optim.SGD([w, b], lr=0.1)),
    "sgd_momentum_nesterov_wd": torch_run(lambda w, b: torch.optim.SGD([w, b], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "adam_wd": torch_run(lambda w, b: torch.optim.Adam([w, b], lr=0.01, weight_decay=0.1)),
    "adamw_groups": torch_run(lambda w, b: torch.optim.AdamW(
        [{"params": [w], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}], lr=0.01, betas=(0.9, 0.99))),
    "adamw_clip": torch_run(lambda w, b: torch.optim.AdamW(
        [{"params": [w], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}], lr=0.01, betas=(0.9, 0.99)), clip=0.5),
    "adafactor": adafactor_run(),
    "lamb_wd": lamb_run(),
}

failures = 0
checked = 0
for row in trace:
    w_ref, b_ref = references[row["config"]][row["step"] - 1]
    got = np.concatenate([row["weight"], row["bias"]])
    want = np.concatenate([w_ref.ravel(), b_ref])
    err = np.max(np.abs(got - want) / np.maximum(1e-3, np.abs(want)))
    checked += 1
    if not err < 1e-9:
        failures += 1
        print(f"{row['config']} step {row['step']}: max relative error {err:.3e}\n  ctgrad {got}\n  reference {want}")
print(f"{checked - failures} passed, {failures} failed")
sys.exit(1 if failures or checked != 35 else 0)
