"""The PyTorch reference of ctgrad's BERT (models/bert.hpp): same architecture and initialisation,
and a state_dict whose names are ctgrad's parameter names, so a ctgrad safetensors checkpoint loads
as it is (read_safetensors in gpt.py). Debian python3-torch; run with Debian's /usr/bin/python3.

  BertMlm(...)(ids, segments, lengths, picks, targets) -> logits [P, vocab], loss
  BertClassifier(...)(ids, segments, lengths, labels)  -> logits [B, classes], loss
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x, keep):  # keep [B, 1, 1, S]: True where the key is a real token
        B, T, d = x.shape
        q, k, v = (w(x).view(B, T, self.heads, d // self.heads).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = F.dropout(F.softmax(att.masked_fill(~keep, float("-inf")), dim=-1), self.dropout, self.training)
        return self.wo((att @ v).transpose(1, 2).contiguous().view(B, T, d))


class Ffn(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))  # erf GELU, as BERT


class Layer(nn.Module):
    def __init__(self, d, heads, d_ff, dropout, eps, pre_norm):
        super().__init__()
        self.attn, self.ffn = Attention(d, heads, dropout), Ffn(d, d_ff)
        self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
        self.dropout, self.pre_norm = dropout, pre_norm

    def forward(self, x, keep):
        drop = lambda y: F.dropout(y, self.dropout, self.training)  # noqa: E731
        if self.pre_norm:
            x = x + drop(self.attn(self.ln_1(x), keep))
            return x + drop(self.ffn(self.ln_2(x)))
        x = self.ln_1(x + drop(self.attn(x, keep)))
        return self.ln_2(x + drop(self.ffn(x)))


class Encoder(nn.Module):
    def __init__(self, vocab, n_layer, heads, d_model, d_ff, context, segments=2, dropout=0.1, eps=1e-12, pre_norm=False):
        super().__init__()
        self.tok, self.pos, self.seg = nn.Embedding(vocab, d_model), nn.Embedding(context, d_model), nn.Embedding(segments, d_model)
        self.emb_norm = nn.LayerNorm(d_model, eps=eps)
        self.layer = nn.ModuleList([Layer(d_model, heads, d_ff, dropout, eps, pre_norm) for _ in range(n_layer)])
        if pre_norm:
            self.final_norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout, self.pre_norm = dropout, pre_norm

    def encode(self, ids, segments, lengths):
        B, S = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(S, device=ids.device)) + self.seg(segments)
        x = F.dropout(self.emb_norm(x), self.dropout, self.training)
        keep = (torch.arange(S, device=ids.device)[None, :] < lengths[:, None])[:, None, None, :]
        for layer in self.layer:
            x = layer(x, keep)
        return self.final_norm(x) if self.pre_norm else x


def bert_init(model, std=0.02):
    """BERT's: weights N(0, std) truncated at 2 sd, biases 0, norms 1."""
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif "norm" in name or ".ln_" in name:
            nn.init.ones_(p)
        else:
            nn.init.trunc_normal_(p, 0.0, std, -2 * std, 2 * std)


class BertMlm(Encoder):
    def __init__(self, *args, label_smoothing=0.0, next_sentence=False, **kw):
        super().__init__(*args, **kw)
        d, vocab = self.tok.weight.shape[1], self.tok.weight.shape[0]
        self.mlm = nn.Module()
        self.mlm.dense, self.mlm.norm = nn.Linear(d, d), nn.LayerNorm(d, eps=self.emb_norm.eps)
        self.mlm.bias = nn.Parameter(torch.zeros(vocab))
        if next_sentence:  # BERT's second objective, from the pooled <cls> vector
            self.pooler = nn.Linear(d, d)
            self.nsp = nn.Module()
            self.nsp.out = nn.Linear(d, 2)
        self.label_smoothing, self.next_sentence = label_smoothing, next_sentence
        bert_init(self)

    def forward(self, ids, segments, lengths, picks, targets=None, is_next=None):
        x = self.encode(ids, segments, lengths)
        h = x.reshape(-1, x.shape[-1])[picks]  # the scored positions only
        h = self.mlm.norm(F.gelu(self.mlm.dense(h)))
        logits = h @ self.tok.weight.t() + self.mlm.bias  # tied to the token embedding
        loss = None if targets is None else F.cross_entropy(logits, targets, label_smoothing=self.label_smoothing)
        if self.next_sentence:
            self.nsp_logits = self.nsp.out(torch.tanh(self.pooler(x[:, 0])))
            if loss is not None:
                loss = loss + F.cross_entropy(self.nsp_logits, is_next)
        return logits, loss


class BertClassifier(Encoder):
    def __init__(self, *args, classes=2, **kw):
        super().__init__(*args, **kw)
        d = self.tok.weight.shape[1]
        self.pooler = nn.Linear(d, d)
        self.cls = nn.Module()
        self.cls.out = nn.Linear(d, classes)
        bert_init(self)

    def forward(self, ids, segments, lengths, labels=None):
        x = self.encode(ids, segments, lengths)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        logits = self.cls.out(F.dropout(pooled, self.dropout, self.training))
        return logits, None if labels is None else F.cross_entropy(logits, labels)
