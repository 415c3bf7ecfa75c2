// The original Transformer ("Attention Is All You Need"), encoder-decoder, declared in the DSL:
//   encoder layer enc.<l>:  x = ln_1(x + drop(self_attn(x, src padding mask)))
//                           x = ln_2(x + drop(ffn(x)))                       ReLU, d_ff wide
//   decoder layer dec.<l>:  y = ln_1(y + drop(self_attn(y, causal + tgt padding)))
//                           y = ln_2(y + drop(cross_attn(y, memory, src padding)))
//                           y = ln_3(y + drop(ffn(y)))
//   inputs: emb[ids] * sqrt(d_model) + sinusoidal positions, then dropout (shared vocabulary)
//   logits = y emb^T: the pre-softmax projection tied to the embedding (paper section 3.4)
// Post-norm ("Add & Norm") as in the paper: layers::transformer_block with Norm::post. Embedding
// N(0, d^-1/2) (so emb * sqrt(d) has unit scale), linear layers Xavier-uniform, biases 0.
// Hyperparameters: dropout (0.1), label_smoothing (0.1), norm_eps (1e-5).
//
// Three graphs share the parameter names:
//   transformer(C)          training: src [B, S], src_len [B], tgt_in [B, T], tgt_len [B], tgt_out [B, T]
//                           -> logits [B, T, vocab], loss (label-smoothed cross-entropy, pad ignored)
//   transformer_encoder(C)  inference: src, src_len -> per decoder layer the cross-attention keys
//                           and values "cross.<l>.k/v" [B, heads, S, d_head], computed once
//   transformer_step(C)     one incremental decoding step: ids [B, T] of new target tokens,
//                           positions [T], src_len, the cross keys/values and the self-attention
//                           caches "cache.<l>.k/v" [B, heads, past + T, d_head]
//                           -> logits [B, T, vocab] and "present.<l>.k/v"
// Symbols: Batch; Seq = target length; SeqKV = source length (training) or cache length (step);
// Sym3 = source length in the step graph.
#pragma once
#include <ctgrad/models/translation_inputs.hpp>
#include <ctgrad/graph/program.hpp>
#include <ctgrad/ops/ops.hpp>
#include <ctgrad/models/decoding.hpp>
#include <ctgrad/models/layers/layers.hpp>
#include <ctgrad/models/translator.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace ctgrad::models {

// Shapes and topology only: dropout and label smoothing are hyperparameters. The architecture
// (arch) is the paper's; an ablation changes it: pre-norm adds a final
// norm to each stack ("enc_norm", "dec_norm"), learned positions are a table per stack
// ("enc_pos", "dec_pos": [max_positions, d]), an untied output is "out.weight" [vocab, d].
struct TransformerConfig {
  int vocab = 8000, n_layer = 6, d_model = 512, heads = 8, d_ff = 2048;
  int pad = 0;  // the padding id: ignored by the loss, masked by the lengths
  layers::Arch arch{.norm = layers::Norm::post, .act = layers::Act::relu, .pos = layers::Pos::sinusoidal, .tie = true};
  int max_positions = 256;  // learned positions: the longest sequence
};

inline constexpr TransformerConfig kTransformerBase{.vocab = 8000, .n_layer = 6, .d_model = 512, .heads = 8, .d_ff = 2048};
// Trains on 2 cores in minutes: the translation default.
inline constexpr TransformerConfig kTransformerSmall{.vocab = 8000, .n_layer = 3, .d_model = 256, .heads = 4, .d_ff = 1024};
// The Annotated Transformer's copy task: symbols 1..10, 0 pads (trained without dropout or smoothing).
inline constexpr TransformerConfig kTransformerCopy{.vocab = 11, .n_layer = 2, .d_model = 64, .heads = 4, .d_ff = 128};

namespace transformer_inputs {
using namespace translation_inputs;  // src, src_len, tgt_in, tgt_len, tgt_out; step: ids [Batch, Seq], positions [Seq]
}  // namespace transformer_inputs

namespace detail {

constexpr layers::TransformerBlockOptions transformer_block_options(Builder& g, const TransformerConfig& c, bool decoder) {
  const Real p = g.hyper("dropout", 0.1);
  return {.attention = {.heads = c.heads, .dropout = p, .causal = decoder},
          .ffn = {.d_ff = gated(c.arch.act) ? layers::gated_width(c.d_ff) : c.d_ff, .activation = c.arch.act},
          .placement = c.arch.norm,
          .norm = {.kind = c.arch.norm_kind, .eps = g.hyper("norm_eps", 1e-5)},
          .dropout = p,
          .cross = decoder,
          .names = {.self = "self", .cross = "cross", .ffn = "ffn"}};
}

// emb[ids] * sqrt(d) + positions (at `positions` when given, else 0..T-1), dropout. `stack` names
// a learned table ("enc", "dec").
constexpr Value transformer_embed(Builder& g, const TransformerConfig& c, Value emb, Value ids, const Value* positions, std::string_view stack) {
  Value x = layers::embed(emb, ids, true);
  const Dim len = ids.shape()[1];
  if (c.arch.pos == layers::Pos::sinusoidal)
    x = add(x, positions ? sinusoidal_positions_at(*positions, c.d_model) : sinusoidal_positions(g, len, c.d_model));
  if (c.arch.pos == layers::Pos::learned) {
    std::string name(stack);
    name += "_pos";
    Value table = layers::embedding_table(g.scope(name), c.max_positions, c.d_model, init::normal(0.02));
    x = add(x, positions ? ctgrad::embedding(table, *positions) : prefix_rows(table, len));
  }
  return dropout(x, g.hyper("dropout", 0.1));
}

// Pre-norm stacks end with a norm ("enc_norm", "dec_norm"); post-norm ones are normalised already.
constexpr Value transformer_stack_end(Builder& g, const TransformerConfig& c, Value x, std::string_view stack) {
  if (c.arch.norm == layers::Norm::post) return x;
  std::string name(stack);
  name += "_norm";
  return layers::norm(g.scope(name), x, {.kind = c.arch.norm_kind, .eps = g.hyper("norm_eps", 1e-5)});
}

// The logits: tied to the shared embedding (the paper), or an own projection "out".
constexpr Value transformer_logits(Builder& g, const TransformerConfig& c, Value y, Value emb) {
  if (c.arch.tie) return layers::tied_logits(y, emb);
  return layers::linear(g.scope("out"), y, c.vocab, {.bias = false, .init = init::normal(1 / ops::const_sqrt(double(c.d_model)))});
}

// `weights`, when given, receives each layer's attention probabilities (for heatmaps).
constexpr Value transformer_encode(Builder& g, const TransformerConfig& c, Value emb, Value src, Value src_len, Value* weights = nullptr) {
  Value x = transformer_embed(g, c, emb, src, nullptr, "enc");        // [B, S, d]
  const Value mask = key_padding_mask(src_len, SeqKV);              // [B, 1, 1, S]
  const auto block = transformer_block_options(g, c, false);
  for (int l = 0; l < c.n_layer; ++l) {
    const auto r = layers::transformer_block(g.scope("enc", l), {.x = x, .mask = mask, .weights = weights != nullptr}, block);
    if (weights) weights[l] = *r.self_weights;
    x = r.x;
  }
  return transformer_stack_end(g, c, x, "enc");  // memory [B, S, d]
}

// The decoder layers. `self_mask`: target padding (training) or none (decoding, where the cache
// holds only real tokens); `cross[l]` set: precomputed cross keys/values; `caches` set: decoding.
constexpr Value transformer_decode(Builder& g, const TransformerConfig& c, Value y, std::optional<Value> self_mask,
                                   std::optional<Value> memory, Value src_mask, layers::KvCache* cross, layers::KvCache* caches,
                                   Value* self_weights = nullptr, Value* cross_weights = nullptr) {
  const auto block = transformer_block_options(g, c, true);
  for (int l = 0; l < c.n_layer; ++l) {
    layers::BlockInputs in{.x = y, .mask = self_mask, .memory = memory, .memory_mask = src_mask, .weights = self_weights != nullptr};
    if (caches) in.cache = caches[l];
    if (cross) in.cross_cache = cross[l];
    const auto r = layers::transformer_block(g.scope("dec", l), in, block);
    if (caches) caches[l] = *r.cache;
    if (self_weights) self_weights[l] = *r.self_weights, cross_weights[l] = *r.cross_weights;
    y = r.x;
  }
  return transformer_stack_end(g, c, y, "dec");
}

constexpr Value shared_embedding(Builder& g, const TransformerConfig& c) {
  return layers::embedding_table(g.scope("emb"), c.vocab, c.d_model, init::normal(1 / ops::const_sqrt(double(c.d_model))));
}

// The teacher-forced model over inputs src, src_len, tgt_in, tgt_len: the shared embedding and
// the decoder output [B, T, d]; per-layer attention probabilities into the arrays when given.
struct TeacherForced {
  Value emb, y;
};
constexpr TeacherForced transformer_teacher_forced(Builder& g, const TransformerConfig& c, Value* enc_w = nullptr,
                                                   Value* self_w = nullptr, Value* cross_w = nullptr) {
  namespace in = transformer_inputs;
  Value src = g.input(in::src, {Batch, SeqKV});
  Value src_len = g.input(in::src_len, {Batch});
  Value tgt_in = g.input(in::tgt_in, {Batch, Seq});
  Value tgt_len = g.input(in::tgt_len, {Batch});
  Value emb = shared_embedding(g, c);
  Value memory = transformer_encode(g, c, emb, src, src_len, enc_w);
  Value y = transformer_embed(g, c, emb, tgt_in, nullptr, "dec");
  const Value tgt_mask = key_padding_mask(tgt_len, Seq);
  y = transformer_decode(g, c, y, tgt_mask, memory, key_padding_mask(src_len, SeqKV), nullptr, nullptr, self_w, cross_w);
  return {emb, y};
}

}  // namespace detail

constexpr Builder transformer(const TransformerConfig& C) {
  Builder g;
  const auto [emb, y] = detail::transformer_teacher_forced(g, C);
  Value tgt_out = g.input(transformer_inputs::tgt_out, {Batch, Seq});
  Value logits = detail::transformer_logits(g, C, y, emb);  // [B, T, vocab]
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, tgt_out, {.ignore_index = C.pad, .label_smoothing = g.hyper("label_smoothing", 0.1)}));
  return g;
}

// The attention probabilities of every layer and head for a (source, target prefix) pair, as
// outputs "weights.enc.<l>", "weights.dec.<l>", "weights.cross.<l>" [B, heads, Tq, Tk]: heatmaps.
constexpr Builder transformer_attention_maps(const TransformerConfig& C) {
  Builder g;
  std::vector<Value> enc_w(std::size_t(C.n_layer)), self_w(enc_w), cross_w(enc_w);
  detail::transformer_teacher_forced(g, C, enc_w.data(), self_w.data(), cross_w.data());
  for (int l = 0; l < C.n_layer; ++l) {
    const Scope w = g.scope("weights");
    g.output(enc_w[std::size_t(l)], w.scope("enc", l).prefix);
    g.output(self_w[std::size_t(l)], w.scope("dec", l).prefix);
    g.output(cross_w[std::size_t(l)], w.scope("cross", l).prefix);
  }
  return g;
}

constexpr Builder transformer_encoder(const TransformerConfig& C) {
  Builder g;
  Value src = g.input(transformer_inputs::src, {Batch, SeqKV});
  Value src_len = g.input(transformer_inputs::src_len, {Batch});
  Value emb = detail::shared_embedding(g, C);
  Value memory = detail::transformer_encode(g, C, emb, src, src_len);
  const auto block = detail::transformer_block_options(g, C, true);
  for (int l = 0; l < C.n_layer; ++l) {
    const layers::KvCache kv = layers::project_kv(g.scope("dec", l).scope("cross"), memory, block.attention);
    const Scope out = g.scope("cross", l);
    g.output(kv.k, out.join("k"));
    g.output(kv.v, out.join("v"));
  }
  return g;
}

constexpr Builder transformer_step(const TransformerConfig& C) {
  Builder g;
  Value ids = g.input(transformer_inputs::ids, {Batch, Seq});
  const bool positioned = C.arch.pos != layers::Pos::none;
  Value positions = positioned ? g.input(transformer_inputs::positions, {Seq}) : Value{};
  Value src_len = g.input(transformer_inputs::src_len, {Batch});
  std::vector<layers::KvCache> cross(std::size_t(C.n_layer)), caches(cross);
  const Shape self_kv{Batch, C.heads, SeqKV, C.d_model / C.heads}, cross_kv{Batch, C.heads, Sym3, C.d_model / C.heads};
  for (int l = 0; l < C.n_layer; ++l) {
    const Scope cr = g.scope("cross", l), ca = g.scope("cache", l);
    cross[std::size_t(l)] = {cr.input("k", cross_kv), cr.input("v", cross_kv), true};
    caches[std::size_t(l)] = {ca.input("k", self_kv), ca.input("v", self_kv)};
  }
  Value emb = detail::shared_embedding(g, C);
  Value y = detail::transformer_embed(g, C, emb, ids, positioned ? &positions : nullptr, "dec");
  const Value src_mask = key_padding_mask(src_len, Sym3);  // [B, 1, 1, S]
  y = detail::transformer_decode(g, C, y, std::nullopt, std::nullopt, src_mask, cross.data(), caches.data());
  for (int l = 0; l < C.n_layer; ++l) {
    const Scope out = g.scope("present", l);
    g.output(caches[std::size_t(l)].k, out.join("k"));
    g.output(caches[std::size_t(l)].v, out.join("v"));
  }
  g.output(detail::transformer_logits(g, C, y, emb), "logits");
  return g;
}


// Incremental decoding of the Transformer (greedy and beam search): models/translator.hpp.
template <TransformerConfig C>
struct TransformerDecoding {
  static constexpr auto encoder_graph = freeze<transformer_encoder, C>();
  static constexpr auto step_graph = freeze<transformer_step, C>();
  static constexpr int n_layer = C.n_layer, heads = C.heads, d_head = C.d_model / C.heads, vocab = C.vocab;
  static constexpr bool step_positions = C.arch.pos != layers::Pos::none;  // the new tokens' positions
};
template <TransformerConfig C>
using Translator = Seq2SeqTranslator<TransformerDecoding<C>>;

}  // namespace ctgrad::models
