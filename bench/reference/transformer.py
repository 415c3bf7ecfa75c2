"""The PyTorch reference of ctgrad's encoder-decoder Transformer (models/transformer.hpp): post-norm
layers, sinusoidal positions, embeddings scaled by sqrt(d_model) and tied to the pre-softmax
projection; state_dict names are ctgrad's parameter names. Debian python3-torch 1.13.
Dropout (0 by default: the parity test) where ctgrad has it: on the embeddings plus positions, on
the attention probabilities, and on each sublayer's output before the residual add."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def sinusoidal(T, d, offset=0):
    p = torch.arange(offset, offset + T, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, dtype=torch.float64)
    w = torch.exp(-i * math.log(10000.0) / d)
    pe = torch.zeros(T, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(p * w)
    pe[:, 1::2] = torch.cos(p * w)
    return pe.float()


class Attention(nn.Module):
    def __init__(self, d, heads, dropout=0.0):
        super().__init__()
        self.heads, self.p = heads, dropout
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d) for _ in range(4))

    def forward(self, q_in, kv_in, keep):  # keep: bool, broadcasting to [B, heads, Tq, Tk]
        B, Tq, d = q_in.shape
        Tk = kv_in.shape[1]
        h, dh = self.heads, d // self.heads
        q = self.wq(q_in).view(B, Tq, h, dh).transpose(1, 2)
        k = self.wk(kv_in).view(B, Tk, h, dh).transpose(1, 2)
        v = self.wv(kv_in).view(B, Tk, h, dh).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
        att = F.dropout(F.softmax(att.masked_fill(~keep, float("-inf")), dim=-1), self.p, self.training)
        return self.wo((att @ v).transpose(1, 2).reshape(B, Tq, d))


class Ffn(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, d, heads, d_ff, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.self, self.ln_1 = Attention(d, heads, dropout), nn.LayerNorm(d)
        self.ffn, self.ln_2 = Ffn(d, d_ff), nn.LayerNorm(d)

    def forward(self, x, keep):
        x = self.ln_1(x + F.dropout(self.self(x, x, keep), self.p, self.training))
        return self.ln_2(x + F.dropout(self.ffn(x), self.p, self.training))


class DecoderLayer(nn.Module):
    def __init__(self, d, heads, d_ff, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.self, self.ln_1 = Attention(d, heads, dropout), nn.LayerNorm(d)
        self.cross, self.ln_2 = Attention(d, heads, dropout), nn.LayerNorm(d)
        self.ffn, self.ln_3 = Ffn(d, d_ff), nn.LayerNorm(d)

    def forward(self, y, memory, self_keep, src_keep):
        y = self.ln_1(y + F.dropout(self.self(y, y, self_keep), self.p, self.training))
        y = self.ln_2(y + F.dropout(self.cross(y, memory, src_keep), self.p, self.training))
        return self.ln_3(y + F.dropout(self.ffn(y), self.p, self.training))


class Transformer(nn.Module):
    def __init__(self, vocab, n_layer, d_model, heads, d_ff, label_smoothing=0.1, pad=0, dropout=0.0):
        super().__init__()
        self.d, self.ls, self.pad, self.p = d_model, label_smoothing, pad, dropout
        self.emb = nn.Embedding(vocab, d_model)
        self.enc = nn.ModuleList([EncoderLayer(d_model, heads, d_ff, dropout) for _ in range(n_layer)])
        self.dec = nn.ModuleList([DecoderLayer(d_model, heads, d_ff, dropout) for _ in range(n_layer)])

    def embed(self, ids, offset=0):
        return F.dropout(self.emb(ids) * math.sqrt(self.d) + sinusoidal(ids.shape[1], self.d, offset), self.p, self.training)

    def encode(self, src, src_len):
        S = src.shape[1]
        src_keep = (torch.arange(S)[None, :] < src_len[:, None])[:, None, None, :]  # [B, 1, 1, S]
        x = self.embed(src)
        for layer in self.enc:
            x = layer(x, src_keep)
        return x, src_keep

    def decode(self, memory, src_keep, tgt_in, tgt_len):
        T = tgt_in.shape[1]
        tgt_keep = (torch.arange(T)[None, :] < tgt_len[:, None])[:, None, None, :]
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        y = self.embed(tgt_in)
        for layer in self.dec:
            y = layer(y, memory, tgt_keep & causal, src_keep)
        return y @ self.emb.weight.t()

    def forward(self, src, src_len, tgt_in, tgt_len, tgt_out=None):
        x, src_keep = self.encode(src, src_len)
        logits = self.decode(x, src_keep, tgt_in, tgt_len)
        loss = None
        if tgt_out is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=self.pad,
                                   label_smoothing=self.ls)
        return logits, loss
