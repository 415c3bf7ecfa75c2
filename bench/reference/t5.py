"""The PyTorch reference of ctgrad's T5 (models/t5.hpp), with Hugging Face T5's semantics (v1.1:
RMSNorm computed in fp32 without mean or bias, no biases, unscaled attention scores, one relative
position bias per stack from layer 0's table shared by every layer, gated GELU in its tanh form,
untied lm_head; v1.0's tied output scaled by d^-0.5 as an option), and a state_dict whose names are
ctgrad's parameter names, so a ctgrad safetensors checkpoint loads as it is (read_safetensors in
gpt.py). Debian python3-torch; run with Debian's /usr/bin/python3.

  T5(...)(src, src_len, tgt_in, tgt_out) -> logits [B, T, vocab], loss (pad ignored)
  relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance): HF's
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """transformers' T5Attention._relative_position_bucket, as it is (relative = memory - query)."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class Attention(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x, kv, keep, bias=None):  # keep [B or 1, 1, Tq or 1, Tk]: True where the key may be seen
        B, T, d = x.shape
        S = kv.shape[1]
        split = lambda y, n: y.view(B, n, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.wq(x), T), split(self.wk(kv), S), split(self.wv(kv), S)
        scores = q @ k.transpose(-2, -1)  # not scaled: T5
        if bias is not None:
            scores = scores + bias
        att = F.dropout(F.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1), self.dropout, self.training)
        return self.wo((att @ v).transpose(1, 2).contiguous().view(B, T, d))


class GatedGelu(nn.Module):
    def __init__(self, d, d_ff, dropout):
        super().__init__()
        self.wi_0, self.wi_1, self.wo = nn.Linear(d, d_ff, bias=False), nn.Linear(d, d_ff, bias=False), nn.Linear(d_ff, d, bias=False)
        self.dropout = dropout

    def forward(self, x):
        h = F.gelu(self.wi_0(x), approximate="tanh") * self.wi_1(x)  # HF's gelu_new
        return self.wo(F.dropout(h, self.dropout, self.training))


class Layer(nn.Module):
    def __init__(self, d, heads, d_ff, dropout, eps, cross):
        super().__init__()
        self.attn, self.ffn, self.ln_1 = Attention(d, heads, dropout), GatedGelu(d, d_ff, dropout), RMSNorm(d, eps)
        if cross:
            self.cross, self.ln_3 = Attention(d, heads, dropout), RMSNorm(d, eps)
        self.ln_2, self.dropout, self.has_cross = RMSNorm(d, eps), dropout, cross

    def forward(self, x, keep, bias, memory=None, memory_keep=None):
        drop = lambda y: F.dropout(y, self.dropout, self.training)  # noqa: E731
        h = self.ln_1(x)
        x = x + drop(self.attn(h, h, keep, bias))
        if self.has_cross:
            x = x + drop(self.cross(self.ln_2(x), memory, memory_keep))
            return x + drop(self.ffn(self.ln_3(x)))
        return x + drop(self.ffn(self.ln_2(x)))


class Stack(nn.Module):
    def __init__(self, n_layer, d, heads, d_ff, dropout, eps, buckets, max_distance, decoder):
        super().__init__()
        self.rel_bias = nn.Embedding(buckets, heads)
        for i in range(n_layer):  # named "<stack>.<i>", as ctgrad's
            self.add_module(str(i), Layer(d, heads, d_ff, dropout, eps, decoder))
        self.n_layer = n_layer
        self.final_norm = RMSNorm(d, eps)
        self.decoder, self.buckets, self.max_distance, self.dropout = decoder, buckets, max_distance, dropout

    def bias(self, T):  # [1, heads, T, T], computed once and shared by the layers
        pos = torch.arange(T)
        rel = pos[None, :] - pos[:, None]  # memory - query
        b = relative_position_bucket(rel, not self.decoder, self.buckets, self.max_distance)
        return self.rel_bias(b).permute(2, 0, 1)[None]

    def forward(self, x, keep, memory=None, memory_keep=None):
        bias = self.bias(x.shape[1])
        x = F.dropout(x, self.dropout, self.training)
        for i in range(self.n_layer):
            x = getattr(self, str(i))(x, keep, bias, memory, memory_keep)
        return F.dropout(self.final_norm(x), self.dropout, self.training)


class T5(nn.Module):
    def __init__(self, vocab, n_layer, n_dec_layer, d_model, heads, d_ff, buckets=32, max_distance=128, tied=False, pad=0,
                 dropout=0.1, eps=1e-6, label_smoothing=0.0):
        super().__init__()
        self.shared = nn.Embedding(vocab, d_model)
        self.enc = Stack(n_layer, d_model, heads, d_ff, dropout, eps, buckets, max_distance, False)
        self.dec = Stack(n_dec_layer, d_model, heads, d_ff, dropout, eps, buckets, max_distance, True)
        if not tied:
            self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.tied, self.pad, self.d, self.label_smoothing = tied, pad, d_model, label_smoothing
        self.init()

    def init(self):
        """Hugging Face T5's _init_weights (factor 1), lm_head N(0, d^-0.5) as ctgrad's."""
        d = self.d
        for name, p in self.named_parameters():
            if name.endswith("_norm.weight") or ".ln_" in name:
                nn.init.ones_(p)
            elif name == "shared.weight":
                nn.init.normal_(p, 0, 1.0)
            elif name.endswith("wq.weight"):
                heads = self.enc.rel_bias.weight.shape[1]
                nn.init.normal_(p, 0, (d * (d // heads)) ** -0.5)
            elif name.endswith("ffn.wo.weight"):
                nn.init.normal_(p, 0, p.shape[1] ** -0.5)
            elif name.endswith("wo.weight"):
                nn.init.normal_(p, 0, p.shape[1] ** -0.5)
            else:
                nn.init.normal_(p, 0, d ** -0.5)

    def forward(self, src, src_len, tgt_in, tgt_out):
        S, T = src.shape[1], tgt_in.shape[1]
        src_keep = (torch.arange(S)[None, :] < src_len[:, None])[:, None, None, :]
        memory = self.enc(self.shared(src), src_keep)
        causal = torch.ones(T, T, dtype=torch.bool).tril()[None, None]
        y = self.dec(self.shared(tgt_in), causal, memory, src_keep)
        logits = (y * self.d ** -0.5) @ self.shared.weight.t() if self.tied else self.lm_head(y)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=self.pad,
                               label_smoothing=self.label_smoothing)
        return logits, loss
