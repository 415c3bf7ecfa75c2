"""The PyTorch reference of ctgrad's Bahdanau encoder-decoder (models/seq2seq.hpp), written as
d2l 11.4 builds it (Seq2SeqEncoder, AdditiveAttention, Seq2SeqAttentionDecoder), with its parameter
names. Padding as ctgrad treats it: the encoder's sequences are packed (pack_padded_sequence: a
row's state stops at its last token), and a padded target step keeps the decoder's state and
outputs zeros. Debian python3-torch; run with /usr/bin/python3."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class AdditiveAttention(nn.Module):
    def __init__(self, num_hiddens, dropout):
        super().__init__()
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=False)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        """queries [B, 1, H], keys (projected) [B, S, H], values [B, S, H]: the context [B, 1, H] and the weights [B, 1, S]."""
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + keys.unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)
        mask = torch.arange(scores.shape[-1])[None, None, :] < valid_lens[:, None, None]
        weights = F.softmax(scores.masked_fill(~mask, -1e6), dim=-1)
        return torch.bmm(self.dropout(weights), values), weights


class Encoder(nn.Module):
    def __init__(self, vocab, embed, hidden, layers, dropout):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.rnn = nn.GRU(embed, hidden, layers, dropout=dropout, batch_first=True)

    def forward(self, src, src_len):
        packed = pack_padded_sequence(self.embedding(src), src_len.cpu(), batch_first=True, enforce_sorted=False)
        out, state = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        return out, state


class Decoder(nn.Module):
    def __init__(self, vocab, embed, hidden, layers, dropout):
        super().__init__()
        self.attention = AdditiveAttention(hidden, dropout)
        self.embedding = nn.Embedding(vocab, embed)
        self.rnn = nn.GRU(embed + hidden, hidden, layers, dropout=dropout, batch_first=True)
        self.dense = nn.Linear(hidden, vocab)

    def forward(self, tgt_in, tgt_len, memory, keys, src_len, state):
        x = self.embedding(tgt_in)  # [B, T, E]
        outputs, weights = [], []
        for t in range(tgt_in.shape[1]):
            context, w = self.attention(state[-1].unsqueeze(1), keys, memory, src_len)
            out, new_state = self.rnn(torch.cat((context, x[:, t : t + 1]), dim=-1), state)
            live = (t < tgt_len).float()  # a padded step keeps the state and outputs zeros
            state = new_state * live[None, :, None] + state * (1 - live)[None, :, None]
            outputs.append(out * live[:, None, None])
            weights.append(w * live[:, None, None])
        return self.dense(torch.cat(outputs, dim=1)), torch.cat(weights, dim=1)


class Seq2Seq(nn.Module):
    def __init__(self, vocab, embed, hidden, layers, dropout=0.0, label_smoothing=0.0):
        super().__init__()
        self.encoder = Encoder(vocab, embed, hidden, layers, dropout)
        self.decoder = Decoder(vocab, embed, hidden, layers, dropout)
        self.label_smoothing = label_smoothing

    def forward(self, src, src_len, tgt_in, tgt_len, tgt_out, pad=0):
        memory, state = self.encoder(src, src_len)
        keys = self.decoder.attention.W_k(memory)
        logits, self.attention = self.decoder(tgt_in, tgt_len, memory, keys, src_len, state)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=pad, label_smoothing=self.label_smoothing)
        return logits, loss
