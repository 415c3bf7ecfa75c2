// A Llama-style decoder-only language model, declared in the DSL, with Hugging Face Llama's
// parameter names (so outside tools read its checkpoints):
//   x = embed_tokens[ids]                                                  [Batch, Seq, d]
//   per layer model.layers.<l>:
//     x += o_proj(attn(rope(q_proj h), rope(k_proj h), v_proj h))  h = input_layernorm(x)
//          causal, heads query heads over kv_heads key/value heads (grouped-query attention)
//     x += down_proj(silu(gate_proj h) * up_proj h)                h = post_attention_layernorm(x)
//   logits = lm_head(norm(x))                                              [Batch, Seq, vocab]
// RMSNorm everywhere, no biases, an untied head, rotary positions (half-split, as Hugging Face's
// rotate_half). Options a study varies (LlamaConfig): kv_heads (GQA; 1: multi-query; heads:
// multi-head), interleaved RoPE pairs (GPT-J's / Meta's original layout), QK-norm (Qwen3:
// "self_attn.q_norm/k_norm"), a sliding window, biases, a tied head, and a mixture of experts
// in place of every MLP (models/layers/moe.hpp: "mlp.gate.weight" [E, d] the router,
// "mlp.experts.gate_proj/up_proj/down_proj" the experts' stacked weights; the loss adds
// moe_balance_weight x the load-balancing loss and moe_z_weight x the router z-loss, and the
// graph outputs "ce", "moe.balance", "moe.z", "moe.dropped").
// Hyperparameters of a MoE: moe_balance_weight (0.01, Switch), moe_z_weight (0.001, ST-MoE).
//
// Hyperparameters (run time): dropout (residual branches and attention probabilities, 0),
// label_smoothing (0), init_std (0.02; the projections into the residual stream, o_proj and
// down_proj, by 1/sqrt(2 n_layer) as GPT-2's), norm_eps (1e-5).
//
// Two graphs share the parameter names, as for the GPT:
//   llama(C)          training/evaluation: ids, targets -> logits, loss
//   llama_decoder(C)  one decoding step: ids [Batch, Seq] of the new tokens, their positions [Seq]
//                     (RoPE's angles), per layer the caches "cache.<l>.k/v" [Batch, kv_heads,
//                     SeqKV, d_head] -> logits and "present.<l>.k/v": the cache holds kv_heads.
#pragma once
#include <ctgrad/graph/program.hpp>
#include <ctgrad/models/layers/layers.hpp>
#include <ctgrad/models/layers/moe.hpp>
#include <ctgrad/models/llama_config.hpp>
#include <ctgrad/models/lm_sampler.hpp>
#include <ctgrad/ops/ops.hpp>

namespace ctgrad::models {

namespace llama_inputs {
inline constexpr InputName ids{"ids", DType::index};              // [Batch, Seq]
inline constexpr InputName targets{"targets", DType::index};      // [Batch, Seq] the next token at each position
inline constexpr InputName positions{"positions", DType::index};  // decoder: [Seq] positions of the new tokens
}  // namespace llama_inputs

namespace detail {

constexpr layers::MultiHeadAttentionOptions llama_attention(const LlamaConfig& c, Real dropout, Init w, Init resid) {
  const LlamaRopeScaling& r = c.rope_scaling;
  return {.heads = c.n_head, .dropout = dropout, .causal = true, .bias = c.bias || c.qkv_bias, .out_bias = c.bias, .init = w, .out_init = resid,
          .kv_heads = c.kv_heads,
          .rope = RopeOptions{.theta = c.rope_theta, .interleaved = c.rope_interleaved, .scaling = r.type, .factor = r.factor,
                              .low_freq_factor = r.low_freq_factor, .high_freq_factor = r.high_freq_factor, .original_context = r.original_context},
          .qk_norm = c.qk_norm, .window = c.window,
          .names = {.q = "q_proj", .k = "k_proj", .v = "v_proj", .o = "o_proj"}};
}

struct LlamaStack {
  Value x;
  std::optional<Value> balance, z, dropped;  // a MoE's auxiliary terms, means over the layers
};

// The layers and the final norm; with `positions`, each layer reads and writes its caches.
constexpr LlamaStack llama_layers(Builder& g, const LlamaConfig& c, Value x, std::optional<Value> positions) {
  using namespace layers;
  const Real p = g.hyper("dropout", 0), init_std = g.hyper("init_std", 0.02), eps = g.hyper("norm_eps", 1e-5);
  const Init w = init::normal(init_std), resid = w.scaled(1 / ops::const_sqrt(2.0 * c.n_layer));
  const MultiHeadAttentionOptions attn = llama_attention(c, p, w, resid);
  const FeedForwardOptions mlp{.d_ff = c.d_ff * c.ffn_mult, .activation = Act::swiglu, .bias = c.bias, .init = w, .out_init = resid,
                               .names = {.gate = "gate_proj", .up = "up_proj", .down = "down_proj"}};
  const NormOptions rms{.kind = NormKind::rms, .eps = eps};
  const MoeOptions moe{.experts = c.moe_experts, .top_k = c.moe_top_k, .capacity_factor = c.moe_capacity, .d_ff = c.d_ff, .init = w, .out_init = resid};
  LlamaStack out;
  const Scope model = g.scope("model");
  for (int l = 0; l < c.n_layer; ++l) {
    const Scope layer = model.scope("layers", l);
    AttentionInputs in{.q = norm(layer.scope("input_layernorm"), x, rms)};
    if (positions) {
      const Scope cache = g.scope("cache", l);
      const Shape kv{Batch, c.kv_heads, SeqKV, c.d_model / c.n_head};
      in.cache = KvCache{cache.input("k", kv), cache.input("v", kv)};
      in.positions = *positions;
    }
    const AttentionResult a = multi_head_attention(layer.scope("self_attn"), in, attn);
    if (positions) {
      const Scope present = g.scope("present", l);
      g.output(a.cache->k, present.join("k"));
      g.output(a.cache->v, present.join("v"));
    }
    x = x + dropout(a.out, p);
    const Value h = norm(layer.scope("post_attention_layernorm"), x, rms);
    if (c.moe_experts == 0) {
      x = x + dropout(feed_forward(layer.scope("mlp"), h, mlp), p);
      continue;
    }
    const MoeResult m = moe_feed_forward(layer.scope("mlp"), h, moe);
    x = x + dropout(m.y, p);
    const double share = 1.0 / c.n_layer;
    auto accumulate = [&](std::optional<Value>& total, Value v) { total = total ? add(*total, scale(v, share)) : scale(v, share); };
    accumulate(out.balance, m.balance);
    accumulate(out.z, m.z);
    accumulate(out.dropped, m.dropped);
  }
  out.x = norm(model.scope("norm"), x, rms);
  return out;
}

constexpr Value llama_logits(Builder& g, const LlamaConfig& c, Value x, Value embed_tokens, Real init_std) {
  if (c.tie) return layers::tied_logits(x, embed_tokens);
  return layers::linear(g.scope("lm_head"), x, c.vocab, {.bias = false, .init = init::normal(init_std)});
}

}  // namespace detail

// Training and evaluation: next-token cross-entropy over every position.
constexpr Builder llama(const LlamaConfig& C) {
  Builder g;
  Value ids = g.input(llama_inputs::ids, {Batch, Seq});
  Value targets = g.input(llama_inputs::targets, {Batch, Seq});
  const Real init_std = g.hyper("init_std", 0.02);
  Value table = layers::embedding_table(g.scope("model").scope("embed_tokens"), C.vocab, C.d_model, init::normal(init_std));
  const Value x = layers::embed(table, ids);
  const Real p = g.hyper("dropout", 0);
  const detail::LlamaStack s = detail::llama_layers(g, C, dropout(x, p), std::nullopt);
  Value logits = detail::llama_logits(g, C, s.x, table, init_std);  // [B, T, vocab]
  g.output(logits, "logits");
  Value ce = cross_entropy(logits, targets, {.label_smoothing = g.hyper("label_smoothing", 0)});
  if (!s.balance) {
    g.loss(ce);
    return g;
  }
  // A mixture of experts: the weighted auxiliary terms join the loss; each is an output to log.
  g.output(ce, "ce");
  g.output(*s.balance, "moe.balance");
  g.output(*s.z, "moe.z");
  g.output(*s.dropped, "moe.dropped");
  const Value balance = scale(*s.balance, g.hyper("moe_balance_weight", 0.01));
  const Value with_balance = ce + balance;
  const Value z = scale(*s.z, g.hyper("moe_z_weight", 0.001));
  g.loss(with_balance + z);
  return g;
}

// One incremental decoding step (inference only).
constexpr Builder llama_decoder(const LlamaConfig& C) {
  Builder g;
  Value ids = g.input(llama_inputs::ids, {Batch, Seq});
  Value positions = g.input(llama_inputs::positions, {Seq});
  const Real init_std = g.hyper("init_std", 0.02);
  Value table = layers::embedding_table(g.scope("model").scope("embed_tokens"), C.vocab, C.d_model, init::normal(init_std));
  Value x = detail::llama_layers(g, C, layers::embed(table, ids), positions).x;
  g.output(detail::llama_logits(g, C, x, table, init_std), "logits");
  return g;
}

// Text generation with a key/value cache of kv_heads heads from any compiled llama_decoder(C)
// program (C: the trained config, given at run time for its sizes).
class LlamaSampler : public LmSampler {
 public:
  LlamaSampler(std::unique_ptr<Executor<float>> decoder, const LlamaConfig& c, std::span<const Parameter<float>> weights)
      : LmSampler(std::move(decoder),
                  {.layers = c.n_layer, .cache_heads = c.kv_heads, .d_head = c.d_model / c.n_head, .vocab = c.vocab, .context = c.context},
                  weights, "LlamaSampler") {}
};

// The generator of one compile-time config.
template <LlamaConfig C>
class LlamaGenerator : public LlamaSampler {
 public:
  static constexpr auto graph = freeze<llama_decoder, C>();
  explicit LlamaGenerator(std::span<const Parameter<float>> weights, Options opts = {})
      : LlamaSampler(std::make_unique<Program<graph>>(opts), C, weights) {}
};

}  // namespace ctgrad::models
