"""The PyTorch reference of ctgrad's recurrent layers (models/layers/recurrent.hpp): an embedding,
nn.GRU or nn.LSTM (batch_first, padded batches packed with pack_padded_sequence) and a linear head,
with the parameter names ctgrad gives them (embed.weight, rnn.weight_ih_l0, ..., head.weight).
Debian python3-torch; run with /usr/bin/python3."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class RnnTagger(nn.Module):
    def __init__(self, kind, vocab, d, hidden, layers, bidirectional):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        rnn = nn.GRU if kind == "gru" else nn.LSTM
        self.rnn = rnn(d, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=True)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), vocab)
        self.kind = kind

    def forward(self, ids, mask, targets):
        """ids, mask, targets [B, L]; mask 1 on each row's first tokens. Logits [B, L, vocab], the
        mean cross-entropy over the unmasked tokens, and the final states h_n (c_n) [layers*dirs, B, H]."""
        lengths = mask.sum(1).cpu()
        packed = pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
        out, states = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
        logits = self.head(out)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        self.h_n = states if self.kind == "gru" else states[0]
        self.c_n = None if self.kind == "gru" else states[1]
        return logits, loss
