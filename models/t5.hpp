// T5 (Raffel et al. 2020), v1.1 by default, encoder-decoder declared in the DSL:
//   encoder:  x = drop(shared[src])                                        [B, S, d]
//             per layer enc.<l>:  x = x + drop(attn(rms_1(x), padding mask, enc bias))
//                                 x = x + drop(ffn(rms_2(x)))             gated GELU: wo(gelu(wi_0 x) * wi_1 x) (v1.1),
//                                                                          or v1.0's ReLU: fc2(relu(fc1 x))
//             memory = drop(rms(x))                                        enc.final_norm
//   decoder:  y = drop(shared[tgt_in])                                     [B, T, d]
//             per layer dec.<l>:  y = y + drop(attn(rms_1(y), causal, dec bias))
//                                 y = y + drop(cross(rms_2(y), memory, src padding))
//                                 y = y + drop(ffn(rms_3(y)))
//             y = drop(rms(y))                                             dec.final_norm
//   logits = lm_head(y) (v1.1, untied), or (y d^-1/2) shared^T (v1.0, tied)
// RMSNorm without bias or mean (eps 1e-6), no bias anywhere, no absolute positions: each stack has
// one relative position bias table ("enc.rel_bias", "dec.rel_bias": 32 buckets, distances to 128,
// bidirectional in the encoder, causal in the decoder) computed once and added to every layer's
// self-attention scores; cross-attention has none. Scores are not scaled by 1/sqrt(d_head): T5
// folds that into the query projection's initialisation.
// Initialisation (Mesh TensorFlow / Hugging Face T5, factor 1): shared N(0, 1); wq N(0, (d d_head)^-1/2);
// wk, wv N(0, d^-1/2); wo N(0, (heads d_head)^-1/2); wi_0, wi_1 N(0, d^-1/2); ffn.wo N(0, d_ff^-1/2);
// relative bias N(0, d^-1/2); norms 1; lm_head N(0, d^-1/2), Mesh TensorFlow's dense default (a
// unit-variance logit at the start; Hugging Face draws it N(0, 1)).
// Hyperparameters: dropout (0.1; T5 v1.1 pretrains without), label_smoothing (0), norm_eps (1e-6).
//
// Graphs sharing the parameter names (inputs as the Transformer's, models/transformer.hpp):
//   t5(C)          training: src [B, S], src_len [B], tgt_in [B, T] (pad, then the targets shifted
//                  right), tgt_out [B, T] (pad ignored) -> logits [B, T, vocab], loss
//   t5_encoder(C)  decoding: src, src_len -> "cross.<l>.k/v" [B, heads, S, d_head]
//   t5_step(C)     one decoding step: ids [B, T] over "cache.<l>.k/v" [B, heads, past + T, d_head],
//                  the cross keys/values and src_len -> logits, "present.<l>.k/v"
// Symbols: Batch; Seq = target length; SeqKV = source length (training, encoder) or cache length
// (step); Sym3 = source length in the step graph.
#pragma once
#include <ctgrad/graph/program.hpp>
#include <ctgrad/ops/ops.hpp>
#include <ctgrad/models/decoding.hpp>
#include <ctgrad/models/layers/layers.hpp>
#include <ctgrad/models/t5_config.hpp>
#include <ctgrad/models/translator.hpp>

#include <array>
#include <vector>

namespace ctgrad::models {

namespace t5_inputs {
inline constexpr InputName src{"src", DType::index};          // [Batch, SeqKV] source ids, padded
inline constexpr InputName src_len{"src_len", DType::index};  // [Batch] source lengths
inline constexpr InputName tgt_in{"tgt_in", DType::index};    // [Batch, Seq] pad y1 .. y(T-1), padded
inline constexpr InputName tgt_out{"tgt_out", DType::index};  // [Batch, Seq] y1 .. yT (pad ignored)
inline constexpr InputName ids{"ids", DType::index};          // step: [Batch, Seq] new target tokens
}  // namespace t5_inputs

namespace detail {

constexpr Real inv_sqrt(int n) { return Real(1 / ops::const_sqrt(double(n))); }

constexpr layers::TransformerBlockOptions t5_block_options(Builder& g, const T5Config& c, bool decoder) {
  const Real p = g.hyper("dropout", 0.1);
  const int dh = c.d_model / c.heads;
  return {.attention = {.heads = c.heads,
                        .dropout = p,
                        .causal = decoder,
                        .bias = false,
                        .scale_scores = false,
                        .init = init::normal(inv_sqrt(c.d_model)),
                        .out_init = init::normal(inv_sqrt(c.heads * dh)),
                        .q_init = init::normal(inv_sqrt(c.d_model * dh))},
          .ffn = {.d_ff = c.d_ff,
                  .activation = c.ffn_act,
                  .dropout = p,
                  .bias = false,
                  .init = init::normal(inv_sqrt(c.d_model)),
                  .out_init = init::normal(inv_sqrt(c.d_ff))},
          .placement = layers::Norm::pre,
          .norm = {.kind = layers::NormKind::rms, .eps = g.hyper("norm_eps", 1e-6)},
          .dropout = p,
          .cross = decoder,
          .names = {.self = "attn", .cross = "cross", .ffn = "ffn"}};
}

constexpr Value t5_shared(Builder& g, const T5Config& c) { return layers::embedding_table(g.scope("shared"), c.vocab, c.d_model, init::normal(1.0)); }

constexpr Value t5_rel_bias(Builder& g, const T5Config& c, const char* stack, Dim queries, Dim keys, bool bidirectional) {
  return layers::relative_bias(g.scope(stack).scope("rel_bias"), c.heads, queries, keys,
                               {.buckets = c.buckets, .max_distance = c.max_distance, .bidirectional = bidirectional},
                               init::normal(inv_sqrt(c.d_model)));
}

constexpr Value t5_final(Builder& g, const T5Config& c, const char* stack, Value x) {
  const layers::NormOptions o = t5_block_options(g, c, false).norm;
  const Value y = layers::norm(g.scope(stack).scope("final_norm"), x, o);
  return dropout(y, g.hyper("dropout", 0.1));
}

constexpr Value t5_encode(Builder& g, const T5Config& c, Value shared, Value src, Value src_len) {
  Value x = layers::embed(shared, src);  // [B, S, d]
  x = dropout(x, g.hyper("dropout", 0.1));
  const Value mask = key_padding_mask(src_len, SeqKV);                     // [B, 1, 1, S]
  const Value bias = t5_rel_bias(g, c, "enc", SeqKV, SeqKV, true);         // [1, heads, S, S]
  const auto block = t5_block_options(g, c, false);
  for (int l = 0; l < c.n_layer; ++l) x = layers::transformer_block(g.scope("enc", l), {.x = x, .mask = mask, .bias = bias}, block).x;
  return t5_final(g, c, "enc", x);  // memory [B, S, d]
}

// The decoder over `tgt` [B, T]; `keys` is the self-attention's key length (T in training, the
// cache length past + T in a step). `memory` in training, `cross`/`caches` in a step.
constexpr Value t5_decode(Builder& g, const T5Config& c, Value shared, Value tgt, Dim keys, std::optional<Value> memory, Value src_mask,
                          layers::KvCache* cross, layers::KvCache* caches) {
  Value y = layers::embed(shared, tgt);
  y = dropout(y, g.hyper("dropout", 0.1));
  const Value bias = t5_rel_bias(g, c, "dec", Seq, keys, false);
  const auto block = t5_block_options(g, c, true);
  for (int l = 0; l < c.n_dec_layer; ++l) {
    layers::BlockInputs in{.x = y, .bias = bias, .memory = memory, .memory_mask = src_mask};
    if (caches) in.cache = caches[l];
    if (cross) in.cross_cache = cross[l];
    const auto r = layers::transformer_block(g.scope("dec", l), in, block);
    if (caches) caches[l] = *r.cache;
    y = r.x;
  }
  return t5_final(g, c, "dec", y);
}

constexpr Value t5_logits(Builder& g, const T5Config& c, Value y, Value shared) {
  if (c.tied) return layers::tied_logits(scale(y, inv_sqrt(c.d_model)), shared);
  return layers::linear(g.scope("lm_head"), y, c.vocab, {.bias = false, .init = init::normal(inv_sqrt(c.d_model))});
}

}  // namespace detail

constexpr Builder t5(const T5Config& C) {
  namespace in = t5_inputs;
  Builder g;
  Value src = g.input(in::src, {Batch, SeqKV});
  Value src_len = g.input(in::src_len, {Batch});
  Value tgt_in = g.input(in::tgt_in, {Batch, Seq});
  Value tgt_out = g.input(in::tgt_out, {Batch, Seq});
  Value shared = detail::t5_shared(g, C);
  Value memory = detail::t5_encode(g, C, shared, src, src_len);
  Value y = detail::t5_decode(g, C, shared, tgt_in, Seq, memory, key_padding_mask(src_len, SeqKV), nullptr, nullptr);
  Value logits = detail::t5_logits(g, C, y, shared);  // [B, T, vocab]
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, tgt_out, {.ignore_index = C.pad, .label_smoothing = g.hyper("label_smoothing", 0)}));
  return g;
}

constexpr Builder t5_encoder(const T5Config& C) {
  Builder g;
  Value src = g.input(t5_inputs::src, {Batch, SeqKV});
  Value src_len = g.input(t5_inputs::src_len, {Batch});
  Value memory = detail::t5_encode(g, C, detail::t5_shared(g, C), src, src_len);
  const auto block = detail::t5_block_options(g, C, true);
  for (int l = 0; l < C.n_dec_layer; ++l) {
    const layers::KvCache kv = layers::project_kv(g.scope("dec", l).scope("cross"), memory, block.attention);
    const Scope out = g.scope("cross", l);
    g.output(kv.k, out.join("k"));
    g.output(kv.v, out.join("v"));
  }
  return g;
}

constexpr Builder t5_step(const T5Config& C) {
  Builder g;
  Value ids = g.input(t5_inputs::ids, {Batch, Seq});
  Value src_len = g.input(t5_inputs::src_len, {Batch});
  std::vector<layers::KvCache> cross(std::size_t(C.n_dec_layer)), caches(cross);
  const Shape self_kv{Batch, C.heads, SeqKV, C.d_model / C.heads}, cross_kv{Batch, C.heads, Sym3, C.d_model / C.heads};
  for (int l = 0; l < C.n_dec_layer; ++l) {
    const Scope cr = g.scope("cross", l), ca = g.scope("cache", l);
    cross[std::size_t(l)] = {cr.input("k", cross_kv), cr.input("v", cross_kv), true};
    caches[std::size_t(l)] = {ca.input("k", self_kv), ca.input("v", self_kv)};
  }
  Value shared = detail::t5_shared(g, C);
  Value y = detail::t5_decode(g, C, shared, ids, SeqKV, std::nullopt, key_padding_mask(src_len, Sym3), cross.data(), caches.data());
  for (int l = 0; l < C.n_dec_layer; ++l) {
    const Scope out = g.scope("present", l);
    g.output(caches[std::size_t(l)].k, out.join("k"));
    g.output(caches[std::size_t(l)].v, out.join("v"));
  }
  g.output(detail::t5_logits(g, C, y, shared), "logits");
  return g;
}

// Incremental decoding of a T5 (greedy and beam search; the decoder starts from pad).
template <T5Config C>
struct T5Decoding {
  static constexpr auto encoder_graph = freeze<t5_encoder, C>();
  static constexpr auto step_graph = freeze<t5_step, C>();
  static constexpr int n_layer = C.n_dec_layer, heads = C.heads, d_head = C.d_model / C.heads, vocab = C.vocab;
  static constexpr bool step_positions = false;  // relative positions come from the cache length
};
template <T5Config C>
using T5Translator = Seq2SeqTranslator<T5Decoding<C>>;

}  // namespace ctgrad::models
