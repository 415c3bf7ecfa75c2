// GPT-2-style decoder-only language model, declared in the DSL:
//   x = drop(wte[ids] + wpe[positions])                               [Batch, Seq, d]
//   per block h.<l>:  x += drop(attn(ln_1(x)))   causal, fused QKV     [Batch, Seq, d]
//                     x += drop(mlp(ln_2(x)))    GELU (tanh), 4d wide
//   logits = ln_f(x) wte^T                       tied to the embedding [Batch, Seq, vocab]
// GPT-2's initialisation: weights N(0, init_std), the projections that write into the residual
// stream (attn.wo, mlp.fc2) N(0, init_std / sqrt(2 n_layer)), biases 0, norms 1.
//
// Hyperparameters (set at run time, Program::set_hyper or `--set`): dropout (embeddings,
// attention probabilities, residual branches; 0), label_smoothing (0), init_std (0.02),
// norm_eps (1e-5).
//
// Two graphs share the parameter names, so one checkpoint serves both:
//   gpt(C)          training/evaluation: ids, targets -> logits, loss
//   gpt_decoder(C)  one incremental decoding step: ids [Batch, Seq] of the new tokens, their
//                   positions [Seq], and per layer the key/value caches "cache.<l>.k/v"
//                   [Batch, heads, SeqKV, d_head] (past + Seq rows of room) -> logits and the
//                   updated caches "present.<l>.k/v". A step costs O(context), not a re-run.
// Static sizes come from a GptConfig (a preset, or any sizes); batch and sequence length are runtime dims. The
// architecture choices (GptConfig::arch: norm placement and kind, activation, positions, tied
// output) are GPT-2's by default; an ablation changes them (any combination of config keys), as it does the
// options of the Llama's changes (kv_heads, qk_norm, bias; pos=rope: rotary q and k, no wpe): post-norm drops
// ln_f (each block ends normalised), SwiGLU's hidden width is 2/3 of 4d (about equal parameters),
// sinusoidal or no positions drop wpe (sinusoids enter at the token embeddings' scale, RMS init_std
// as GPT-2's learned table: unscaled, RMS 0.71 against 0.02, they drown the tokens), an untied
// output is "lm_head.weight" [vocab, d].
#pragma once
#include <ctgrad/graph/program.hpp>
#include <ctgrad/ops/ops.hpp>
#include <ctgrad/models/decoding.hpp>
#include <ctgrad/models/gpt_config.hpp>
#include <ctgrad/models/lm_sampler.hpp>
#include <ctgrad/models/layers/layers.hpp>
#include <ctgrad/models/sampling.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ctgrad::models {

namespace gpt_inputs {
inline constexpr InputName ids{"ids", DType::index};              // [Batch, Seq] token ids
inline constexpr InputName targets{"targets", DType::index};      // [Batch, Seq] the next token at each position
inline constexpr InputName positions{"positions", DType::index};  // decoder: [Seq] positions of the new tokens
}  // namespace gpt_inputs

namespace detail {

// The blocks and the final norm. With `decode`, each layer's attention reads and writes its caches.
constexpr Value gpt_blocks(Builder& g, const GptConfig& c, Value x, std::optional<Value> positions, bool decode) {
  using namespace layers;
  const Real p = g.hyper("dropout", 0), init_std = g.hyper("init_std", 0.02), eps = g.hyper("norm_eps", 1e-5);
  const Init w = init::normal(init_std), resid = w.scaled(1 / ops::const_sqrt(2.0 * c.n_layer));
  const int kv_heads = c.kv_heads ? c.kv_heads : c.n_head;
  MultiHeadAttentionOptions attention{.heads = c.n_head, .dropout = p, .causal = true, .bias = c.bias, .fused_qkv = kv_heads == c.n_head,
                                      .init = w, .out_init = resid, .kv_heads = kv_heads, .qk_norm = c.qk_norm};
  if (c.arch.pos == Pos::rope) attention.rope = RopeOptions{};
  const TransformerBlockOptions block{
      .attention = attention,
      .mixer = c.mixer,
      .ssm = {.state = c.ssm_state, .width = ssm_width_for(c.d_model, c.ssm_state), .init = w, .out_init = resid},
      .ffn = {.d_ff = c.d_ff ? c.d_ff : gated(c.arch.act) ? gated_width(4 * c.d_model) : 4 * c.d_model, .activation = c.arch.act, .bias = c.bias, .init = w,
              .out_init = resid},
      .placement = c.arch.norm,
      .norm = {.kind = c.arch.norm_kind, .eps = eps},
      .dropout = p};
  for (int l = 0; l < c.n_layer; ++l) {
    BlockInputs in{.x = x, .positions = positions};
    if (decode && c.mixer == Mixer::ssm) {  // the state after the tokens before, instead of a cache
      in.positions.reset();
      in.ssm_state = g.input(g.scope("state", l).prefix, {Batch, ssm_width_for(c.d_model, c.ssm_state), c.ssm_state});
    } else if (decode) {
      const Scope cache = g.scope("cache", l);
      const Shape kv{Batch, kv_heads, SeqKV, c.d_model / c.n_head};
      in.cache = KvCache{cache.input("k", kv), cache.input("v", kv)};
    }
    const BlockResult r = transformer_block(g.scope("h", l), in, block);
    if (decode && c.mixer == Mixer::ssm) {
      g.output(*r.ssm_state, g.scope("next", l).prefix);
    } else if (decode) {
      const Scope present = g.scope("present", l);
      g.output(r.cache->k, present.join("k"));
      g.output(r.cache->v, present.join("v"));
    }
    x = r.x;
  }
  return c.arch.norm == Norm::pre ? norm(g.scope("ln_f"), x, {.kind = c.arch.norm_kind, .eps = eps}) : x;
}

// The paper's sinusoids (RMS 1/sqrt(2)) at RMS init_std, the scale of the token embeddings.
constexpr Value scaled_sinusoids(Value pe, Real init_std) { return scale(scale(pe, init_std), ops::const_sqrt(2.0)); }

// The logits: tied to the token table (GPT-2), or an own projection "lm_head".
constexpr Value gpt_logits(Builder& g, const GptConfig& c, Value x, Value wte, Real init_std) {
  if (c.arch.tie) return layers::tied_logits(x, wte);
  return layers::linear(g.scope("lm_head"), x, c.vocab, {.bias = false, .init = init::normal(init_std)});
}

}  // namespace detail

// Training and evaluation: next-token cross-entropy over every position.
constexpr Builder gpt(const GptConfig& C) {
  using namespace layers;
  Builder g;
  Value ids = g.input(gpt_inputs::ids, {Batch, Seq});
  Value targets = g.input(gpt_inputs::targets, {Batch, Seq});
  const Real init_std = g.hyper("init_std", 0.02);
  Value wte = embedding_table(g.scope("wte"), C.vocab, C.d_model, init::normal(init_std));
  Value x = embed(wte, ids);
  if (C.arch.pos == Pos::learned) x = add_learned_positions(g.scope("wpe"), x, C.context, init::normal(init_std));
  if (C.arch.pos == Pos::sinusoidal) x = add(x, detail::scaled_sinusoids(sinusoidal_positions(g, ids.shape()[1], C.d_model), init_std));
  x = detail::gpt_blocks(g, C, dropout(x, g.hyper("dropout", 0)), std::nullopt, false);
  Value logits = detail::gpt_logits(g, C, x, wte, init_std);  // [B, T, vocab]
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, targets, {.label_smoothing = g.hyper("label_smoothing", 0)}));
  return g;
}

// One incremental decoding step (inference only).
constexpr Builder gpt_decoder(const GptConfig& C) {
  using namespace layers;
  Builder g;
  Value ids = g.input(gpt_inputs::ids, {Batch, Seq});                   // [B, T] the new tokens
  const Real init_std = g.hyper("init_std", 0.02);
  Value wte = embedding_table(g.scope("wte"), C.vocab, C.d_model, init::normal(init_std));
  Value x = embed(wte, ids);
  std::optional<Value> positions;
  if (C.arch.pos != Pos::none) positions = g.input(gpt_inputs::positions, {Seq});  // [T] past .. past+T-1
  if (C.arch.pos == Pos::learned) x = add(x, ctgrad::embedding(embedding_table(g.scope("wpe"), C.context, C.d_model, init::normal(init_std)), *positions));
  if (C.arch.pos == Pos::sinusoidal) x = add(x, detail::scaled_sinusoids(sinusoidal_positions_at(*positions, C.d_model), init_std));
  x = detail::gpt_blocks(g, C, x, C.arch.pos == Pos::rope ? positions : std::nullopt, true);
  g.output(detail::gpt_logits(g, C, x, wte, init_std), "logits");  // [B, T, vocab]
  return g;
}


// Text generation with a key/value cache (models/lm_sampler.hpp) from any compiled
// gpt_decoder(C) program (C: the trained config, given at run time for its sizes).
class GptSampler : public LmSampler {
 public:
  // Copies the weights, by name, from a model trained with gpt(C) (or any list with these names).
  GptSampler(std::unique_ptr<Executor<float>> decoder, const GptConfig& c, std::span<const Parameter<float>> weights)
      : LmSampler(std::move(decoder), shape(c), weights, "GptSampler") {}

 private:
  static LmDecoderShape shape(const GptConfig& c) {
    const bool ssm = c.mixer == layers::Mixer::ssm;
    LmDecoderShape s{.layers = ssm ? 0 : c.n_layer, .cache_heads = c.kv_heads ? c.kv_heads : c.n_head, .d_head = c.d_model / c.n_head,
                     .vocab = c.vocab, .context = c.context, .positions = c.arch.pos != layers::Pos::none};
    if (ssm) s.state_layers = c.n_layer, s.state_shape = {layers::ssm_width_for(c.d_model, c.ssm_state), c.ssm_state};
    return s;
  }
};

// The generator of one compile-time config.
template <GptConfig C>
class GptGenerator : public GptSampler {
 public:
  static constexpr auto graph = freeze<gpt_decoder, C>();
  explicit GptGenerator(std::span<const Parameter<float>> weights, Options opts = {})
      : GptSampler(std::make_unique<Program<graph>>(opts), C, weights) {}
};

}  // namespace ctgrad::models
