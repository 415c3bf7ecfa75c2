// Bahdanau's attention on an RNN encoder-decoder, as d2l 11.4 builds it: a GRU encoder over the
// embedded source; a GRU decoder whose step attends (additive attention) from its top layer's state
// to the encoder's outputs and reads [context; embedded token]; a linear layer on its outputs.
// The decoder is a scan (graph/scan.hpp) trained with teacher forcing; its step is also a graph
// of its own for greedy and beam search (models/recurrent_translator.hpp). Parameter names are
// d2l's PyTorch module's ("encoder.rnn.weight_ih_l0", "decoder.attention.W_q.weight", ...).
// Inputs are the Transformer's (models/transformer.hpp), so the same batches feed both.
// Hyperparameters: dropout (between GRU layers and on the attention weights), label_smoothing.
#pragma once
#include <array>

#include <ctgrad/graph/scan.hpp>
#include <ctgrad/models/layers/attention_pooling.hpp>
#include <ctgrad/models/layers/embedding.hpp>
#include <ctgrad/models/layers/recurrent.hpp>
#include <ctgrad/models/translation_inputs.hpp>
#include <ctgrad/ops/loss.hpp>
#include <ctgrad/ops/mask.hpp>

namespace ctgrad::models {

struct Seq2SeqConfig {
  int vocab = 8000;
  int embed = 256;
  int hidden = 256;   // the GRUs' and the attention's (d2l's num_hiddens)
  int layers = 2;
  int pad = 0;
  bool recompute = false;  // keep only the states between forward and backward
  friend constexpr bool operator==(const Seq2SeqConfig&, const Seq2SeqConfig&) = default;
};
inline constexpr Seq2SeqConfig kSeq2SeqSmall{};  // d2l's sizes
inline constexpr Seq2SeqConfig kSeq2SeqTiny{.vocab = 40, .embed = 16, .hidden = 24, .layers = 2};
// The decoder's scan body reads each layer's weights from outside it, and a scan takes at most
// kMaxInputs (24) inputs: 3 layers is what fits.
inline constexpr int kSeq2SeqMaxLayers = 3;

namespace seq2seq_inputs {
using namespace translation_inputs;  // src, src_len, tgt_in, tgt_len, tgt_out; step: ids [Batch]
inline constexpr InputName memory{"memory", DType::real};  // step: the encoder's outputs [Batch, Sym3, hidden]
inline constexpr InputName keys{"keys", DType::real};      // step: their attention keys [Batch, Sym3, hidden]
}  // namespace seq2seq_inputs

namespace detail {

struct Encoded {
  Value memory, keys;                                 // [B, S, H] each
  std::array<Value, kSeq2SeqMaxLayers> state{};       // the final state of each layer [B, H]
};

constexpr Encoded seq2seq_encode(Builder& g, const Seq2SeqConfig& c, Value src, Value src_mask) {
  const Scope enc = g.scope("encoder");
  const Value x = layers::embedding(enc.scope("embedding"), src, c.vocab, c.embed);
  const layers::RecurrentResult r = layers::gru(enc.scope("rnn"), {.x = x, .mask = src_mask},
                                                {.hidden = c.hidden, .layers = c.layers, .dropout = g.hyper("dropout", 0.2), .recompute = c.recompute});
  Encoded e{r.out, layers::additive_keys(g.scope("decoder").scope("attention"), r.out, c.hidden)};
  for (int l = 0; l < c.layers; ++l) e.state[std::size_t(l)] = r.h[std::size_t(l)];
  return e;
}

struct DecoderStep {
  std::array<Value, kSeq2SeqMaxLayers> state{};
  Value out, weights;  // the top layer's new state [B, H]; the attention weights [B, S]
};

// One decoder step: y [B, E] the embedded previous token, state[l] [B, H].
constexpr DecoderStep seq2seq_decoder_step(const Scope& dec, const Seq2SeqConfig& c, Value y, const std::array<Value, kSeq2SeqMaxLayers>& state,
                                           Value memory, Value keys, Value src_mask, Real p) {
  const layers::PooledAttention a =
      layers::additive_attention(dec.scope("attention"), state[std::size_t(c.layers - 1)], keys, memory, src_mask, {.hidden = c.hidden, .dropout = p});
  Value x = concat({a.out, y}, -1);  // d2l: the context, then the embedded token
  DecoderStep r;
  for (int l = 0; l < c.layers; ++l) {
    const layers::RecurrentWeights w =
        layers::recurrent_weights(dec.scope("rnn"), 3, x.shape().back(1), c.hidden, true, "_l" + Scope::digits(l));
    r.state[std::size_t(l)] = layers::gru_step(layers::input_gates(x, w), state[std::size_t(l)], w);
    x = l + 1 < c.layers ? dropout(r.state[std::size_t(l)], p) : r.state[std::size_t(l)];
  }
  r.out = x;
  r.weights = a.weights;
  return r;
}

constexpr void check_config(Builder& g, const Seq2SeqConfig& c) {
  if (c.layers < 1 || c.layers > kSeq2SeqMaxLayers) g.fail(Msg("seq2seq: layers must be 1 to ").add(kSeq2SeqMaxLayers), g.loc);
}

}  // namespace detail

// Training with teacher forcing: logits [B, T, vocab], the attention weights [B, T, S] as output
// "attention" (heatmaps), cross-entropy over the target tokens.
constexpr Builder seq2seq(const Seq2SeqConfig& C) {
  namespace in = seq2seq_inputs;
  Builder g;
  detail::check_config(g, C);
  Value src = g.input(in::src, {Batch, SeqKV});
  Value src_len = g.input(in::src_len, {Batch});
  Value tgt_in = g.input(in::tgt_in, {Batch, Seq});
  Value tgt_len = g.input(in::tgt_len, {Batch});
  Value tgt_out = g.input(in::tgt_out, {Batch, Seq});
  const Real p = g.hyper("dropout", 0.2);
  const Value src_mask = key_padding_mask(src_len, SeqKV, 0), tgt_mask = key_padding_mask(tgt_len, Seq, 0);  // [B, S], [B, T]
  const detail::Encoded e = detail::seq2seq_encode(g, C, src, src_mask);
  const Scope dec = g.scope("decoder");
  const Value y = layers::embedding(dec.scope("embedding"), tgt_in, C.vocab, C.embed);  // [B, T, E]
  ScanInputs si{.xs = {y}, .mask = tgt_mask, .recompute = C.recompute};
  for (int l = 0; l < C.layers; ++l) si.init.push_back(e.state[std::size_t(l)]);
  const ScanResult r = scan(dec.scope("steps"), si, [&](const Scope&, const ScanStep& t) -> ScanStepResult {
    std::array<Value, kSeq2SeqMaxLayers> state{};
    for (int l = 0; l < C.layers; ++l) state[std::size_t(l)] = t.state[std::size_t(l)];
    const detail::DecoderStep d = detail::seq2seq_decoder_step(dec, C, t.x[0], state, e.memory, e.keys, src_mask, p);
    ScanStepResult out{.out = {d.out, d.weights}};
    for (int l = 0; l < C.layers; ++l) out.state.push_back(d.state[std::size_t(l)]);
    return out;
  });
  const Value logits = layers::linear(dec.scope("dense"), r.seq[0], C.vocab);
  g.output(logits, "logits");
  g.output(r.seq[1], "attention");
  g.loss(cross_entropy(logits, tgt_out, {.ignore_index = C.pad, .label_smoothing = g.hyper("label_smoothing", 0.0)}));
  return g;
}

// Decoding: the encoder once per source ("memory", "keys", "state.<l>"), then one step per token.
constexpr Builder seq2seq_encoder(const Seq2SeqConfig& C) {
  namespace in = seq2seq_inputs;
  Builder g;
  detail::check_config(g, C);
  Value src = g.input(in::src, {Batch, SeqKV});
  Value src_len = g.input(in::src_len, {Batch});
  g.hyper("dropout", 0.2);
  const detail::Encoded e = detail::seq2seq_encode(g, C, src, key_padding_mask(src_len, SeqKV, 0));
  g.output(e.memory, "memory");
  g.output(e.keys, "keys");
  for (int l = 0; l < C.layers; ++l) g.output(e.state[std::size_t(l)], g.scope("state", l).prefix);
  return g;
}

// ids [B] the previous tokens, "state.<l>" [B, H], memory and keys [B, S, H], src_len [B]:
// logits [B, vocab], "next.<l>" [B, H], "weights" [B, S].
constexpr Builder seq2seq_step(const Seq2SeqConfig& C) {
  namespace in = seq2seq_inputs;
  Builder g;
  detail::check_config(g, C);
  Value ids = g.input(in::ids, {Batch});
  Value src_len = g.input(in::src_len, {Batch});
  Value memory = g.input(in::memory, {Batch, Sym3, C.hidden});
  Value keys = g.input(in::keys, {Batch, Sym3, C.hidden});
  std::array<Value, kSeq2SeqMaxLayers> state{};
  for (int l = 0; l < C.layers; ++l) state[std::size_t(l)] = g.input(g.scope("state", l).prefix, {Batch, C.hidden});
  const Scope dec = g.scope("decoder");
  const Value y = layers::embedding(dec.scope("embedding"), ids, C.vocab, C.embed);  // [B, E]
  const Value mask = key_padding_mask(src_len, Sym3, 0);
  const Real p = g.hyper("dropout", 0.2);
  const detail::DecoderStep d = detail::seq2seq_decoder_step(dec, C, y, state, memory, keys, mask, p);
  g.output(layers::linear(dec.scope("dense"), d.out, C.vocab), "logits");
  for (int l = 0; l < C.layers; ++l) g.output(d.state[std::size_t(l)], g.scope("next", l).prefix);
  g.output(d.weights, "weights");
  return g;
}

}  // namespace ctgrad::models
