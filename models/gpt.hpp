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
//   gpt<C>          training/evaluation: ids, targets -> logits, loss
//   gpt_decoder<C>  one incremental decoding step: ids [Batch, Seq] of the new tokens, their
//                   positions [Seq], and per layer the key/value caches "cache.<l>.k/v"
//                   [Batch, heads, SeqKV, d_head] (past + Seq rows of room) -> logits and the
//                   updated caches "present.<l>.k/v". A step costs O(context), not a re-run.
// Static sizes come from a GptConfig preset; batch and sequence length are runtime dims. The
// architecture choices (GptConfig::arch: norm placement and kind, activation, positions, tied
// output) are GPT-2's by default; an ablation changes them (gpt_variant_space): post-norm drops
// ln_f (each block ends normalised), SwiGLU's hidden width is 2/3 of 4d (about equal parameters),
// sinusoidal or no positions drop wpe (sinusoids enter at the token embeddings' scale, RMS init_std
// as GPT-2's learned table: unscaled, RMS 0.71 against 0.02, they drown the tokens), an untied
// output is "lm_head.weight" [vocab, d].
#pragma once
#include <ctgrad/graph/program.hpp>
#include <ctgrad/ops/ops.hpp>
#include <ctgrad/models/decoding.hpp>
#include <ctgrad/models/layers/layers.hpp>
#include <ctgrad/models/sampling.hpp>
#include <ctgrad/models/variant_space.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ctgrad::models {

// Shapes and topology only: everything else is a hyperparameter.
struct GptConfig {
  int vocab = 256, n_layer = 4, n_head = 4, d_model = 128, context = 64;
  bool bias = true;  // biases in the linear layers (GPT-2 has them)
  layers::Arch arch{.norm = layers::Norm::pre, .act = layers::Act::gelu_tanh, .pos = layers::Pos::learned, .tie = true};
};

// The presets `ctgrad train gpt --set size=...` chooses from.
inline constexpr GptConfig kGptTiny{.vocab = 256, .n_layer = 2, .n_head = 2, .d_model = 32, .context = 32};
// nanoGPT's "baby GPT" CPU recipe (its character vocabulary padded to 256, as nanoGPT pads GPT-2's).
inline constexpr GptConfig kGptSmall{.vocab = 256, .n_layer = 4, .n_head = 4, .d_model = 128, .context = 64};
inline constexpr GptConfig kGptMedium{.vocab = 8192, .n_layer = 6, .n_head = 8, .d_model = 512, .context = 256};

// The architecture keys of a preset for ablations: its variants change at most `order` of them.
constexpr VariantSpace<GptConfig, 6> gpt_variant_space(const GptConfig& p, int order) {
  return {{{norm_axis<GptConfig>(p.arch), norm_kind_axis<GptConfig>(p.arch), act_axis<GptConfig>(p.arch), pos_axis<GptConfig>(p.arch),
            heads_axis<GptConfig>(p.n_head,
                                  [](GptConfig c, std::string_view v) {
                                    c.n_head = parse_int(v);
                                    return c;
                                  }),
            tie_axis<GptConfig>(p.arch)}},
          order};
}

namespace gpt_inputs {
inline constexpr InputName ids{"ids", DType::index};              // [Batch, Seq] token ids
inline constexpr InputName targets{"targets", DType::index};      // [Batch, Seq] the next token at each position
inline constexpr InputName positions{"positions", DType::index};  // decoder: [Seq] positions of the new tokens
}  // namespace gpt_inputs

namespace detail {

// The blocks and the final norm. With `decode`, each layer's attention reads and writes its caches.
constexpr Value gpt_blocks(Builder& g, const GptConfig& c, Value x, bool decode) {
  using namespace layers;
  const Real p = g.hyper("dropout", 0), init_std = g.hyper("init_std", 0.02), eps = g.hyper("norm_eps", 1e-5);
  const Init w = init::normal(init_std), resid = w.scaled(1 / ops::const_sqrt(2.0 * c.n_layer));
  const TransformerBlockOptions block{
      .attention = {.heads = c.n_head, .dropout = p, .causal = true, .bias = c.bias, .fused_qkv = true, .init = w, .out_init = resid},
      .ffn = {.d_ff = gated(c.arch.act) ? gated_width(4 * c.d_model) : 4 * c.d_model, .activation = c.arch.act, .bias = c.bias, .init = w,
              .out_init = resid},
      .placement = c.arch.norm,
      .norm = {.kind = c.arch.norm_kind, .eps = eps},
      .dropout = p};
  for (int l = 0; l < c.n_layer; ++l) {
    BlockInputs in{.x = x};
    if (decode) {
      const Scope cache = g.scope("cache", l);
      const Shape kv{Batch, c.n_head, SeqKV, c.d_model / c.n_head};
      in.cache = KvCache{cache.input("k", kv), cache.input("v", kv)};
    }
    const BlockResult r = transformer_block(g.scope("h", l), in, block);
    if (decode) {
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
template <GptConfig C>
constexpr auto gpt = [] {
  using namespace layers;
  Builder g;
  Value ids = g.input(gpt_inputs::ids, {Batch, Seq});
  Value targets = g.input(gpt_inputs::targets, {Batch, Seq});
  const Real init_std = g.hyper("init_std", 0.02);
  Value wte = embedding_table(g.scope("wte"), C.vocab, C.d_model, init::normal(init_std));
  Value x = embed(wte, ids);
  if (C.arch.pos == Pos::learned) x = add_learned_positions(g.scope("wpe"), x, C.context, init::normal(init_std));
  if (C.arch.pos == Pos::sinusoidal) x = add(x, detail::scaled_sinusoids(sinusoidal_positions(g, ids.shape()[1], C.d_model), init_std));
  x = detail::gpt_blocks(g, C, dropout(x, g.hyper("dropout", 0)), false);
  Value logits = detail::gpt_logits(g, C, x, wte, init_std);  // [B, T, vocab]
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, targets, {.label_smoothing = g.hyper("label_smoothing", 0)}));
  return g;
};

// One incremental decoding step (inference only).
template <GptConfig C>
constexpr auto gpt_decoder = [] {
  using namespace layers;
  Builder g;
  Value ids = g.input(gpt_inputs::ids, {Batch, Seq});                   // [B, T] the new tokens
  const Real init_std = g.hyper("init_std", 0.02);
  Value wte = embedding_table(g.scope("wte"), C.vocab, C.d_model, init::normal(init_std));
  Value x = embed(wte, ids);
  if (C.arch.pos != Pos::none) {
    Value positions = g.input(gpt_inputs::positions, {Seq});            // [T] past .. past+T-1
    x = add(x, C.arch.pos == Pos::learned ? ctgrad::embedding(embedding_table(g.scope("wpe"), C.context, C.d_model, init::normal(init_std)), positions)
                                          : detail::scaled_sinusoids(sinusoidal_positions_at(positions, C.d_model), init_std));
  }
  x = detail::gpt_blocks(g, C, x, true);
  g.output(detail::gpt_logits(g, C, x, wte, init_std), "logits");  // [B, T, vocab]
  return g;
};


// Text generation with a key/value cache: the prompt is read in one decoding step, then each new
// token is one step of Seq 1 over the cached keys and values of everything before it. Runs any
// compiled gpt_decoder<C> program (C: the trained config, given at run time for its sizes).
class GptSampler {
 public:
  // Copies the weights, by name, from a model trained with gpt<C> (or any list with these names).
  GptSampler(std::unique_ptr<Executor<float>> decoder, const GptConfig& c, std::span<const Parameter<float>> weights)
      : prog_(std::move(decoder)), c_(c), cache_(c.n_layer, c.n_head, c.d_model / c.n_head) {
    copy_weights(weights, *prog_, "GptSampler");
  }

  // Appends up to o.max_tokens sampled tokens to `tokens` (a non-empty prompt) and calls
  // on_token(id) for each (one that returns bool stops the generation by returning false). Ids >= n_valid (padding of the vocabulary) are never drawn. The window
  // read is at most o.context tokens (the trained context; 0: the model's context).
  template <class OnToken>
  void generate(std::vector<std::int32_t>& tokens, std::int32_t n_valid, const SamplingOptions& o, OnToken on_token) {
    check(o);
    const std::size_t limit = std::size_t(o.context > 0 ? o.context : c_.context);
    if (limit > std::size_t(c_.context))
      throw std::invalid_argument("ctgrad: GptSampler: context " + std::to_string(limit) + " exceeds the model's " + std::to_string(c_.context));
    if (tokens.empty()) throw std::invalid_argument("ctgrad: GptSampler: the prompt is empty");
    if (tokens.size() > limit)
      throw std::invalid_argument("ctgrad: GptSampler: the prompt has " + std::to_string(tokens.size()) +
                                  " tokens, more than the model's context of " + std::to_string(limit));
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || tokens[i] >= n_valid)
        throw std::invalid_argument("ctgrad: GptSampler: prompt token " + std::to_string(tokens[i]) + " at position " +
                                    std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(n_valid) + ")");
    std::size_t base = 0;   // tokens[base..] is the window the cache holds, at positions 0..
    std::int64_t past = 0;  // tokens of the window whose keys and values are cached
    std::vector<std::pair<double, std::int32_t>> work;
    for (int made = 0; made < o.max_tokens; ++made) {
      if (tokens.size() - base > limit) {  // the window would not fit
        if (!o.slide) return;
        base = tokens.size() - limit / 2;  // re-read the last half of it at positions 0.. and go on
        past = 0;
      }
      step(std::span<const std::int32_t>(tokens).subspan(base + std::size_t(past)), past);
      past = std::int64_t(tokens.size() - base);
      const auto logits = prog_->output("logits");  // [1, T, vocab]: the last row predicts
      const std::int32_t next =
          sample_token({logits.data + (logits.numel - c_.vocab), std::size_t(c_.vocab)}, n_valid, o, std::uint64_t(made), work);
      tokens.push_back(next);
      if constexpr (std::is_same_v<decltype(on_token(next)), bool>) {
        if (!on_token(next)) return;  // the caller stops it (Ctrl-C)
      } else {
        on_token(next);
      }
      if (next == o.end_token) return;
    }
  }

  const Executor<float>& program() const { return *prog_; }

 private:
  // Runs the decoder on `ids` at positions past.., with `past` cached rows; keeps the new caches.
  void step(std::span<const std::int32_t> ids, std::int64_t past) {
    const std::int64_t T = std::int64_t(ids.size());
    prog_->set_input(gpt_inputs::ids, ids, {1, T});
    if (c_.arch.pos != layers::Pos::none) {
      positions_.resize(std::size_t(T));
      for (std::int64_t t = 0; t < T; ++t) positions_[std::size_t(t)] = std::int32_t(past + t);
      prog_->set_input(gpt_inputs::positions, std::span<const std::int32_t>(positions_), {T});
    }
    if (past == 0) cache_.clear();
    cache_.feed(*prog_, 1, T);
    prog_->forward(Mode::infer);
    cache_.collect(*prog_);
  }

  std::unique_ptr<Executor<float>> prog_;
  GptConfig c_;
  KvCacheSet cache_;
  std::vector<std::int32_t> positions_;
};

// The generator of one compile-time config.
template <GptConfig C>
class GptGenerator : public GptSampler {
 public:
  static constexpr auto graph = freeze<gpt_decoder<C>>();
  explicit GptGenerator(std::span<const Parameter<float>> weights, Options opts = {})
      : GptSampler(std::make_unique<Program<graph>>(opts), C, weights) {}
};

}  // namespace ctgrad::models
