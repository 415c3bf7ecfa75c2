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
// "self_attn.q_norm/k_norm"), a sliding window, biases, a tied head.
//
// Hyperparameters (run time): dropout (residual branches and attention probabilities, 0),
// label_smoothing (0), init_std (0.02; the projections into the residual stream, o_proj and
// down_proj, by 1/sqrt(2 n_layer) as GPT-2's), norm_eps (1e-5).
//
// Two graphs share the parameter names, as for the GPT:
//   llama<C>          training/evaluation: ids, targets -> logits, loss
//   llama_decoder<C>  one decoding step: ids [Batch, Seq] of the new tokens, their positions [Seq]
//                     (RoPE's angles), per layer the caches "cache.<l>.k/v" [Batch, kv_heads,
//                     SeqKV, d_head] -> logits and "present.<l>.k/v": the cache holds kv_heads.
#pragma once
#include <ctgrad/graph/program.hpp>
#include <ctgrad/models/layers/layers.hpp>
#include <ctgrad/models/lm_sampler.hpp>
#include <ctgrad/models/variant_space.hpp>
#include <ctgrad/ops/ops.hpp>

namespace ctgrad::models {

struct LlamaConfig {
  int vocab = 256, n_layer = 4, n_head = 4, kv_heads = 2, d_model = 128, context = 64;
  int d_ff = layers::gated_width(4 * 128);  // SwiGLU's hidden width (2/3 of 4d, as Llama)
  double rope_theta = 10000;
  bool rope_interleaved = false;
  bool qk_norm = false;
  int window = 0;       // sliding-window attention (0: the whole context)
  bool bias = false;    // biases in the linear layers
  bool tie = false;     // the head is the token embedding's transpose
};

// The presets `ctgrad train llama --set size=...` chooses from. small: the GPT main job's sizes
// (4 layers, d 128, context 64) as a Llama, 4 query heads over 2 key/value heads.
inline constexpr LlamaConfig kLlamaTiny{.vocab = 256, .n_layer = 2, .n_head = 4, .kv_heads = 2, .d_model = 32, .context = 32,
                                        .d_ff = layers::gated_width(4 * 32)};
inline constexpr LlamaConfig kLlamaSmall{.vocab = 256, .n_layer = 4, .n_head = 4, .kv_heads = 2, .d_model = 128, .context = 64,
                                         .d_ff = layers::gated_width(4 * 128)};
inline constexpr LlamaConfig kLlamaMedium{.vocab = 8192, .n_layer = 6, .n_head = 8, .kv_heads = 2, .d_model = 512, .context = 256,
                                          .d_ff = layers::gated_width(4 * 512)};

// The architecture keys of a preset for ablations: kv_heads (the preset's, 1, heads), rope
// (half, interleaved), qk_norm, window (0, a quarter of the context), bias, tie_embeddings.
constexpr VariantSpace<LlamaConfig, 6> llama_variant_space(const LlamaConfig& p, int order) {
  using detail::count_name;
  using detail::preset_first;
  return {{{{"kv_heads", preset_first(count_name(p.kv_heads), std::array<std::string_view, 2>{"1", count_name(p.n_head)}),
             [](LlamaConfig c, std::string_view v) {
               c.kv_heads = parse_int(v);
               return c;
             }},
            {"rope", preset_first(p.rope_interleaved ? "interleaved" : "half", std::array<std::string_view, 2>{"half", "interleaved"}),
             [](LlamaConfig c, std::string_view v) {
               c.rope_interleaved = v == "interleaved";
               return c;
             }},
            {"qk_norm", preset_first(p.qk_norm ? "true" : "false", std::array<std::string_view, 2>{"false", "true"}),
             [](LlamaConfig c, std::string_view v) {
               c.qk_norm = v == "true";
               return c;
             }},
            {"window", preset_first(p.window == 0 ? "0" : count_name(p.window), std::array<std::string_view, 2>{"0", count_name(p.context / 4)}),
             [](LlamaConfig c, std::string_view v) {
               c.window = parse_int(v);
               return c;
             }},
            {"bias", preset_first(p.bias ? "true" : "false", std::array<std::string_view, 2>{"false", "true"}),
             [](LlamaConfig c, std::string_view v) {
               c.bias = v == "true";
               return c;
             }},
            {"tie_embeddings", preset_first(p.tie ? "true" : "false", std::array<std::string_view, 2>{"false", "true"}),
             [](LlamaConfig c, std::string_view v) {
               c.tie = v == "true";
               return c;
             }}}},
          order};
}

namespace llama_inputs {
inline constexpr InputName ids{"ids", DType::index};              // [Batch, Seq]
inline constexpr InputName targets{"targets", DType::index};      // [Batch, Seq] the next token at each position
inline constexpr InputName positions{"positions", DType::index};  // decoder: [Seq] positions of the new tokens
}  // namespace llama_inputs

namespace detail {

constexpr layers::MultiHeadAttentionOptions llama_attention(const LlamaConfig& c, Real dropout, Init w, Init resid) {
  return {.heads = c.n_head, .dropout = dropout, .causal = true, .bias = c.bias, .init = w, .out_init = resid, .kv_heads = c.kv_heads,
          .rope = RopeOptions{.theta = c.rope_theta, .interleaved = c.rope_interleaved}, .qk_norm = c.qk_norm, .window = c.window,
          .names = {.q = "q_proj", .k = "k_proj", .v = "v_proj", .o = "o_proj"}};
}

// The layers and the final norm; with `positions`, each layer reads and writes its caches.
constexpr Value llama_layers(Builder& g, const LlamaConfig& c, Value x, std::optional<Value> positions) {
  using namespace layers;
  const Real p = g.hyper("dropout", 0), init_std = g.hyper("init_std", 0.02), eps = g.hyper("norm_eps", 1e-5);
  const Init w = init::normal(init_std), resid = w.scaled(1 / ops::const_sqrt(2.0 * c.n_layer));
  const MultiHeadAttentionOptions attn = llama_attention(c, p, w, resid);
  const FeedForwardOptions mlp{.d_ff = c.d_ff, .activation = Act::swiglu, .bias = c.bias, .init = w, .out_init = resid,
                               .names = {.gate = "gate_proj", .up = "up_proj", .down = "down_proj"}};
  const NormOptions rms{.kind = NormKind::rms, .eps = eps};
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
    x = x + dropout(feed_forward(layer.scope("mlp"), norm(layer.scope("post_attention_layernorm"), x, rms), mlp), p);
  }
  return norm(model.scope("norm"), x, rms);
}

constexpr Value llama_logits(Builder& g, const LlamaConfig& c, Value x, Value embed_tokens, Real init_std) {
  if (c.tie) return layers::tied_logits(x, embed_tokens);
  return layers::linear(g.scope("lm_head"), x, c.vocab, {.bias = false, .init = init::normal(init_std)});
}

}  // namespace detail

// Training and evaluation: next-token cross-entropy over every position.
template <LlamaConfig C>
constexpr auto llama = [] {
  Builder g;
  Value ids = g.input(llama_inputs::ids, {Batch, Seq});
  Value targets = g.input(llama_inputs::targets, {Batch, Seq});
  const Real init_std = g.hyper("init_std", 0.02);
  Value table = layers::embedding_table(g.scope("model").scope("embed_tokens"), C.vocab, C.d_model, init::normal(init_std));
  Value x = detail::llama_layers(g, C, dropout(layers::embed(table, ids), g.hyper("dropout", 0)), std::nullopt);
  Value logits = detail::llama_logits(g, C, x, table, init_std);  // [B, T, vocab]
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, targets, {.label_smoothing = g.hyper("label_smoothing", 0)}));
  return g;
};

// One incremental decoding step (inference only).
template <LlamaConfig C>
constexpr auto llama_decoder = [] {
  Builder g;
  Value ids = g.input(llama_inputs::ids, {Batch, Seq});
  Value positions = g.input(llama_inputs::positions, {Seq});
  const Real init_std = g.hyper("init_std", 0.02);
  Value table = layers::embedding_table(g.scope("model").scope("embed_tokens"), C.vocab, C.d_model, init::normal(init_std));
  Value x = detail::llama_layers(g, C, layers::embed(table, ids), positions);
  g.output(detail::llama_logits(g, C, x, table, init_std), "logits");
  return g;
};

// Text generation with a key/value cache of kv_heads heads from any compiled llama_decoder<C>
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
  static constexpr auto graph = freeze<llama_decoder<C>>();
  explicit LlamaGenerator(std::span<const Parameter<float>> weights, Options opts = {})
      : LlamaSampler(std::make_unique<Program<graph>>(opts), C, weights) {}
};

}  // namespace ctgrad::models
