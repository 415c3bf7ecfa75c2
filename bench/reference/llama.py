"""The PyTorch reference of ctgrad's Llama (models/llama.hpp), written as Hugging Face's
modeling_llama computes it (rotate_half RoPE with float32 inverse frequencies, repeat_kv for grouped
heads, RMSNorm in float32), with Hugging Face's parameter names, so a ctgrad safetensors checkpoint
loads as it is. Options beyond Llama: GPT-J's interleaved RoPE pairs, Qwen3's QK-norm (RMSNorm over
each head's features), a sliding window (Mistral), a mixture of experts at a fixed capacity (Switch,
Mixtral; MoeMlp). Debian python3-torch; run with /usr/bin/python3."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rope(x, positions, theta, interleaved):
    """x [B, H, T, d]: Hugging Face's apply_rotary_pos_emb (half-split), or GPT-J's rotate_every_two."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    freqs = positions.float()[:, None] * inv_freq[None, :]  # [T, d/2]
    if interleaved:
        cos, sin = freqs.cos().repeat_interleave(2, -1), freqs.sin().repeat_interleave(2, -1)
        pairs = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
        return x * cos + pairs * sin
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def repeat_kv(x, n_rep):
    B, H, T, d = x.shape
    return x if n_rep == 1 else x[:, :, None].expand(B, H, n_rep, T, d).reshape(B, H * n_rep, T, d)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, self.heads, self.kv_heads = c["d_model"], c["n_head"], c["kv_heads"]
        self.dh = d // self.heads
        self.c = c
        self.q_proj = nn.Linear(d, self.heads * self.dh, bias=c["bias"])
        self.k_proj = nn.Linear(d, self.kv_heads * self.dh, bias=c["bias"])
        self.v_proj = nn.Linear(d, self.kv_heads * self.dh, bias=c["bias"])
        self.o_proj = nn.Linear(self.heads * self.dh, d, bias=c["bias"])
        if c["qk_norm"]:
            self.q_norm = RMSNorm(self.dh, 1e-6)
            self.k_norm = RMSNorm(self.dh, 1e-6)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.dh)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.dh)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.dh).transpose(1, 2)
        if self.c["qk_norm"]:
            q, k = self.q_norm(q), self.k_norm(k)
        pos = torch.arange(T)
        q = rope(q.transpose(1, 2), pos, self.c["rope_theta"], self.c["rope_interleaved"])
        k = rope(k.transpose(1, 2), pos, self.c["rope_theta"], self.c["rope_interleaved"])
        k, v = repeat_kv(k, self.heads // self.kv_heads), repeat_kv(v, self.heads // self.kv_heads)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        allowed = j <= i
        if self.c["window"] > 0:
            allowed &= j > i - self.c["window"]
        att = F.softmax(att.masked_fill(~allowed, float("-inf")), dim=-1)
        return self.o_proj((att @ v).transpose(1, 2).reshape(B, T, self.heads * self.dh))


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f = c["d_model"], c["d_ff"]
        self.gate_proj = nn.Linear(d, f, bias=c["bias"])
        self.up_proj = nn.Linear(d, f, bias=c["bias"])
        self.down_proj = nn.Linear(f, d, bias=c["bias"])

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Experts(nn.Module):
    def __init__(self, e, d, f):
        super().__init__()
        self.gate_proj = nn.Parameter(torch.empty(e, f, d))
        self.up_proj = nn.Parameter(torch.empty(e, f, d))
        self.down_proj = nn.Parameter(torch.empty(e, d, f))


class MoeMlp(nn.Module):
    """A mixture of SwiGLU experts at a fixed capacity (models/layers/moe.hpp): softmax router, top-k
    (gates renormalised for k > 1), an expert's rows filled by every token's first choice in token
    order, then the second choices; a choice finding its expert full is dropped (adds 0). Keeps the
    auxiliary terms of the last call: Switch's balance loss, the router z-loss, the dropped fraction."""

    def __init__(self, c):
        super().__init__()
        d, self.E, self.k, self.factor = c["d_model"], c["moe_experts"], c["moe_top_k"], c["moe_capacity"]
        self.gate = nn.Linear(d, self.E, bias=False)
        self.experts = Experts(self.E, d, c["d_ff"])

    def forward(self, x):
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])
        N, E, k = tokens.shape[0], self.E, self.k
        C = max(1, math.ceil(N * k * self.factor / E - 1e-9))
        logits = self.gate(tokens)
        probs = F.softmax(logits, dim=-1)
        values, idx = probs.topk(k, dim=-1)
        gates = values if k == 1 else values / values.sum(-1, keepdim=True)
        y = torch.zeros_like(tokens)
        taken, dropped = [0] * E, 0
        rows = [[] for _ in range(E)]  # (token, choice) in the order of the expert's rows
        for j in range(k):
            for n in range(N):
                e = int(idx[n, j])
                if taken[e] < C:
                    rows[e].append((n, j))
                    taken[e] += 1
                else:
                    dropped += 1
        ex = self.experts
        for e in range(E):
            if not rows[e]:
                continue
            n = torch.tensor([r[0] for r in rows[e]])
            j = torch.tensor([r[1] for r in rows[e]])
            h = tokens[n]
            out = (F.silu(h @ ex.gate_proj[e].t()) * (h @ ex.up_proj[e].t())) @ ex.down_proj[e].t()
            y = y.index_add(0, n, out * gates[n, j][:, None])
        f = F.one_hot(idx[:, 0], E).float().mean(0)
        self.balance = E * (f * probs.mean(0)).sum()
        self.z = torch.logsumexp(logits, dim=-1).pow(2).mean()
        self.dropped = dropped / (N * k)
        return y.reshape(shape)


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["d_model"], c["norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["d_model"], c["norm_eps"])
        self.mlp = MoeMlp(c) if c.get("moe_experts", 0) else Mlp(c)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["d_model"])
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["n_layer"])])
        self.norm = RMSNorm(c["d_model"], c["norm_eps"])


class Llama(nn.Module):
    """c: the config ctgrad writes (vocab, n_layer, n_head, kv_heads, d_model, d_ff, rope_theta,
    rope_interleaved, qk_norm, window, bias, tie, norm_eps)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Model(c)
        if not c["tie"]:
            self.lm_head = nn.Linear(c["d_model"], c["vocab"], bias=False)
        for name, p in self.named_parameters():  # as models/llama.hpp
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "norm" in name:
                nn.init.ones_(p)
            elif name.endswith(("o_proj.weight", "down_proj.weight", "experts.down_proj")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c["n_layer"]))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, ids, targets=None):
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x)
        x = self.model.norm(x)
        logits = x @ self.model.embed_tokens.weight.t() if self.c["tie"] else self.lm_head(x)
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        if loss is not None and self.c.get("moe_experts", 0):  # the auxiliary terms, means over the layers
            L = len(self.model.layers)
            self.ce = loss
            self.balance = sum(layer.mlp.balance for layer in self.model.layers) / L
            self.z = sum(layer.mlp.z for layer in self.model.layers) / L
            self.dropped = sum(layer.mlp.dropped for layer in self.model.layers) / L
            loss = loss + self.c["moe_balance_weight"] * self.balance + self.c["moe_z_weight"] * self.z
        return logits, loss
