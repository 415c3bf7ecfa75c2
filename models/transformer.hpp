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
//   transformer<C>          training: src [B, S], src_len [B], tgt_in [B, T], tgt_len [B], tgt_out [B, T]
//                           -> logits [B, T, vocab], loss (label-smoothed cross-entropy, pad ignored)
//   transformer_encoder<C>  inference: src, src_len -> per decoder layer the cross-attention keys
//                           and values "cross.<l>.k/v" [B, heads, S, d_head], computed once
//   transformer_step<C>     one incremental decoding step: ids [B, T] of new target tokens,
//                           positions [T], src_len, the cross keys/values and the self-attention
//                           caches "cache.<l>.k/v" [B, heads, past + T, d_head]
//                           -> logits [B, T, vocab] and "present.<l>.k/v"
// Symbols: Batch; Seq = target length; SeqKV = source length (training) or cache length (step);
// Sym3 = source length in the step graph.
#pragma once
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/decoding.hpp>
#include <ctgrad/models/layers/layers.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace ctgrad::models {

// Shapes and topology only: dropout and label smoothing are hyperparameters.
struct TransformerConfig {
  int vocab = 8000, n_layer = 6, d_model = 512, heads = 8, d_ff = 2048;
  int pad = 0;  // the padding id: ignored by the loss, masked by the lengths
};

inline constexpr TransformerConfig kTransformerBase{.vocab = 8000, .n_layer = 6, .d_model = 512, .heads = 8, .d_ff = 2048};
// Trains on 2 cores in minutes: the translation default.
inline constexpr TransformerConfig kTransformerSmall{.vocab = 8000, .n_layer = 3, .d_model = 256, .heads = 4, .d_ff = 1024};
// The Annotated Transformer's copy task: symbols 1..10, 0 pads (trained without dropout or smoothing).
inline constexpr TransformerConfig kTransformerCopy{.vocab = 11, .n_layer = 2, .d_model = 64, .heads = 4, .d_ff = 128};

namespace transformer_inputs {
inline constexpr InputName src{"src", DType::index};              // [Batch, SeqKV] source ids, padded
inline constexpr InputName src_len{"src_len", DType::index};      // [Batch] source lengths
inline constexpr InputName tgt_in{"tgt_in", DType::index};        // [Batch, Seq] <s> y1 .. y(T-1), padded
inline constexpr InputName tgt_len{"tgt_len", DType::index};      // [Batch] target lengths
inline constexpr InputName tgt_out{"tgt_out", DType::index};      // [Batch, Seq] y1 .. yT (pad ignored)
inline constexpr InputName ids{"ids", DType::index};              // step: [Batch, Seq] new target tokens
inline constexpr InputName positions{"positions", DType::index};  // step: [Seq] their positions
}  // namespace transformer_inputs

namespace detail {

constexpr layers::TransformerBlockOptions transformer_block_options(Builder& g, const TransformerConfig& c, bool decoder) {
  const Real p = g.hyper("dropout", 0.1);
  return {.attention = {.heads = c.heads, .dropout = p, .causal = decoder},
          .ffn = {.d_ff = c.d_ff, .activation = layers::Act::relu},
          .placement = layers::Norm::post,
          .norm = {.eps = g.hyper("norm_eps", 1e-5)},
          .dropout = p,
          .cross = decoder,
          .names = {.self = "self", .cross = "cross", .ffn = "ffn"}};
}

// emb[ids] * sqrt(d) + positions (at `positions` when given, else 0..T-1), dropout.
constexpr Value transformer_embed(Builder& g, const TransformerConfig& c, Value emb, Value ids, const Value* positions) {
  Value x = layers::embed(emb, ids, true);
  const Dim len = ids.shape()[1];
  x = add(x, positions ? sinusoidal_positions_at(*positions, c.d_model) : sinusoidal_positions(g, len, c.d_model));
  return dropout(x, g.hyper("dropout", 0.1));
}

// `weights`, when given, receives each layer's attention probabilities (for heatmaps).
constexpr Value transformer_encode(Builder& g, const TransformerConfig& c, Value emb, Value src, Value src_len, Value* weights = nullptr) {
  Value x = transformer_embed(g, c, emb, src, nullptr);               // [B, S, d]
  const Value mask = key_padding_mask(src_len, SeqKV);              // [B, 1, 1, S]
  const auto block = transformer_block_options(g, c, false);
  for (int l = 0; l < c.n_layer; ++l) {
    const auto r = layers::transformer_block(g.scope("enc", l), {.x = x, .mask = mask, .weights = weights != nullptr}, block);
    if (weights) weights[l] = *r.self_weights;
    x = r.x;
  }
  return x;  // memory [B, S, d]
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
  return y;
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
  Value y = transformer_embed(g, c, emb, tgt_in, nullptr);
  y = transformer_decode(g, c, y, key_padding_mask(tgt_len, Seq), memory, key_padding_mask(src_len, SeqKV), nullptr, nullptr, self_w,
                         cross_w);
  return {emb, y};
}

}  // namespace detail

template <TransformerConfig C>
constexpr auto transformer = [] {
  Builder g;
  const auto [emb, y] = detail::transformer_teacher_forced(g, C);
  Value tgt_out = g.input(transformer_inputs::tgt_out, {Batch, Seq});
  Value logits = layers::tied_logits(y, emb);  // [B, T, vocab]
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, tgt_out, {.ignore_index = C.pad, .label_smoothing = g.hyper("label_smoothing", 0.1)}));
  return g;
};

// The attention probabilities of every layer and head for a (source, target prefix) pair, as
// outputs "weights.enc.<l>", "weights.dec.<l>", "weights.cross.<l>" [B, heads, Tq, Tk]: heatmaps.
template <TransformerConfig C>
constexpr auto transformer_attention_maps = [] {
  Builder g;
  std::array<Value, 64> enc_w{}, self_w{}, cross_w{};
  detail::transformer_teacher_forced(g, C, enc_w.data(), self_w.data(), cross_w.data());
  for (int l = 0; l < C.n_layer; ++l) {
    const Scope w = g.scope("weights");
    g.output(enc_w[std::size_t(l)], w.scope("enc", l).prefix);
    g.output(self_w[std::size_t(l)], w.scope("dec", l).prefix);
    g.output(cross_w[std::size_t(l)], w.scope("cross", l).prefix);
  }
  return g;
};

template <TransformerConfig C>
constexpr auto transformer_encoder = [] {
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
};

template <TransformerConfig C>
constexpr auto transformer_step = [] {
  Builder g;
  Value ids = g.input(transformer_inputs::ids, {Batch, Seq});
  Value positions = g.input(transformer_inputs::positions, {Seq});
  Value src_len = g.input(transformer_inputs::src_len, {Batch});
  std::array<layers::KvCache, 64> cross{}, caches{};
  const Shape self_kv{Batch, C.heads, SeqKV, C.d_model / C.heads}, cross_kv{Batch, C.heads, Sym3, C.d_model / C.heads};
  for (int l = 0; l < C.n_layer; ++l) {
    const Scope cr = g.scope("cross", l), ca = g.scope("cache", l);
    cross[std::size_t(l)] = {cr.input("k", cross_kv), cr.input("v", cross_kv), true};
    caches[std::size_t(l)] = {ca.input("k", self_kv), ca.input("v", self_kv)};
  }
  Value emb = detail::shared_embedding(g, C);
  Value y = detail::transformer_embed(g, C, emb, ids, &positions);
  const Value src_mask = key_padding_mask(src_len, Sym3);  // [B, 1, 1, S]
  y = detail::transformer_decode(g, C, y, std::nullopt, std::nullopt, src_mask, cross.data(), caches.data());
  for (int l = 0; l < C.n_layer; ++l) {
    const Scope out = g.scope("present", l);
    g.output(caches[std::size_t(l)].k, out.join("k"));
    g.output(caches[std::size_t(l)].v, out.join("v"));
  }
  g.output(layers::tied_logits(y, emb), "logits");
  return g;
};


struct BeamOptions {
  int beam = 4;         // 1: greedy
  double alpha = 0.6;   // length penalty ((5 + |Y|) / 6)^alpha (GNMT; the paper's 0.6)
  int max_len = 64;     // generated tokens at most (the end token included)
  bool (*stop)() = nullptr;  // polled before each step: true ends the search (Ctrl-C); the best so far is returned
};


// Translation by incremental decoding: the source is encoded once (cross-attention keys and values
// of every decoder layer cached), then each step feeds one token per hypothesis over the cached
// self-attention keys and values. greedy() is beam search with a beam of 1.
template <TransformerConfig C>
class Translator {
 public:
  static constexpr auto encoder_graph = freeze<transformer_encoder<C>>();
  static constexpr auto step_graph = freeze<transformer_step<C>>();

  explicit Translator(std::span<const Parameter<float>> weights, Options opts = {})
      : enc_(opts), step_(opts), cache_(C.n_layer, C.heads, C.d_model / C.heads) {
    copy_weights(weights, enc_, "Translator");
    copy_weights(weights, step_, "Translator");
  }

  // The target tokens after `bos`, up to and without `eos`.
  std::vector<std::int32_t> greedy(std::span<const std::int32_t> src, std::int32_t bos, std::int32_t eos, int max_len = 64) {
    return search(src, bos, eos, BeamOptions{.beam = 1, .alpha = 0, .max_len = max_len});
  }
  std::vector<std::int32_t> search(std::span<const std::int32_t> src, std::int32_t bos, std::int32_t eos, const BeamOptions& o) {
    if (src.empty()) throw std::invalid_argument("ctgrad: Translator: empty source");
    if (o.beam < 1 || o.max_len < 1) throw std::invalid_argument("ctgrad: Translator: beam and max_len must be >= 1");
    if (!(o.alpha >= 0)) throw std::invalid_argument("ctgrad: Translator: the length penalty's alpha must be >= 0");
    for (std::size_t i = 0; i < src.size(); ++i)
      if (src[i] < 0 || src[i] >= C.vocab)
        throw std::invalid_argument("ctgrad: Translator: source token " + std::to_string(src[i]) + " at position " + std::to_string(i) +
                                    " is outside the vocabulary [0, " + std::to_string(C.vocab) + ")");
    const std::int64_t S = std::int64_t(src.size()), dh = C.d_model / C.heads;
    // Encode once; the cross keys/values are then replicated for each hypothesis.
    const std::int32_t len = std::int32_t(S);
    enc_.set_input(transformer_inputs::src, src, {1, S});
    enc_.set_input(transformer_inputs::src_len, std::span<const std::int32_t>(&len, 1), {1});
    enc_.forward(Mode::infer);
    std::vector<std::vector<float>> cross(2 * std::size_t(C.n_layer));
    for (int c = 0; c < 2 * C.n_layer; ++c) {
      const auto t = enc_.output("cross." + std::to_string(c / 2) + (c % 2 ? ".v" : ".k"));
      cross[std::size_t(c)].assign(t.data, t.data + t.numel);
    }
    struct Hyp {
      std::vector<std::int32_t> tokens;
      double logp = 0;
    };
    std::vector<Hyp> alive{Hyp{{bos}, 0.0}}, done;
    auto penalty = [&](std::size_t n) { return std::pow((5.0 + double(n)) / 6.0, o.alpha); };
    cache_.clear();
    std::vector<float> rep;
    std::int64_t cross_rows = 0;  // hypotheses the cross K/V inputs are replicated for
    for (int t = 0; t < o.max_len && !alive.empty() && !(o.stop && o.stop()); ++t) {
      const std::int64_t k = std::int64_t(alive.size());
      ids_.resize(std::size_t(k));
      for (std::int64_t b = 0; b < k; ++b) ids_[std::size_t(b)] = alive[std::size_t(b)].tokens.back();
      const std::int32_t pos = std::int32_t(t);
      lens_.assign(std::size_t(k), len);
      step_.set_input(transformer_inputs::ids, std::span<const std::int32_t>(ids_), {k, 1});
      step_.set_input(transformer_inputs::positions, std::span<const std::int32_t>(&pos, 1), {1});
      step_.set_input(transformer_inputs::src_len, std::span<const std::int32_t>(lens_), {k});
      for (int c = 0; c < 2 * C.n_layer && k != cross_rows; ++c) {  // kept by the program until k changes
        rep.resize(std::size_t(k) * cross[std::size_t(c)].size());
        for (std::int64_t b = 0; b < k; ++b) std::copy(cross[std::size_t(c)].begin(), cross[std::size_t(c)].end(), rep.begin() + b * std::int64_t(cross[std::size_t(c)].size()));
        step_.set_input("cross." + std::to_string(c / 2) + (c % 2 ? ".v" : ".k"), std::span<const float>(rep), {k, C.heads, S, dh});
      }
      cross_rows = k;
      cache_.feed(step_, k, 1);
      step_.forward(Mode::infer);
      cache_.collect(step_);
      const auto logits = step_.output("logits");  // [k, 1, vocab]
      // Candidates: each hypothesis extended by each token, scored by total log-probability.
      cand_.clear();
      for (std::int64_t b = 0; b < k; ++b) {
        const float* l = logits.data + b * C.vocab;
        const double mx = *std::max_element(l, l + C.vocab);
        double z = 0;
        for (int v = 0; v < C.vocab; ++v) z += std::exp(double(l[v]) - mx);
        const double lse = mx + std::log(z);
        for (int v = 0; v < C.vocab; ++v) cand_.push_back({alive[std::size_t(b)].logp + double(l[v]) - lse, int(b), v});
      }
      const std::size_t keep = std::min<std::size_t>(cand_.size(), std::size_t(2 * o.beam));
      std::partial_sort(cand_.begin(), cand_.begin() + std::ptrdiff_t(keep), cand_.end(), [](const Cand& a, const Cand& b) {
        return a.score > b.score || (a.score == b.score && (a.parent < b.parent || (a.parent == b.parent && a.token < b.token)));
      });
      std::vector<Hyp> next;
      parents_.clear();
      for (std::size_t i = 0; i < keep && int(next.size()) < o.beam; ++i) {
        Hyp h{alive[std::size_t(cand_[i].parent)].tokens, cand_[i].score};
        h.tokens.push_back(cand_[i].token);
        if (cand_[i].token == eos) {
          // Finished: kept if among the `beam` best finished so far (by length-penalised score).
          const double sc = h.logp / penalty(h.tokens.size() - 1);
          if (int(done.size()) < o.beam) {
            done.push_back(std::move(h));
          } else {
            auto worst = std::min_element(done.begin(), done.end(), [&](const Hyp& x, const Hyp& y) {
              return x.logp / penalty(x.tokens.size() - 1) < y.logp / penalty(y.tokens.size() - 1);
            });
            if (sc > worst->logp / penalty(worst->tokens.size() - 1)) *worst = std::move(h);
          }
        } else {
          next.push_back(std::move(h));
          parents_.push_back(cand_[i].parent);
        }
      }
      // Stop when the beam is full of finished hypotheses and no live one can beat the best of
      // them (log-probabilities only fall; with alpha >= 0 the penalty is at most max_len's).
      if (int(done.size()) >= o.beam && !next.empty()) {
        double best_done = -1e300;
        for (const Hyp& h : done) best_done = std::max(best_done, h.logp / penalty(h.tokens.size() - 1));
        if (next.front().logp / penalty(std::size_t(o.max_len)) <= best_done) next.clear();
      }
      alive = std::move(next);
      if (!alive.empty()) cache_.reorder(parents_);
    }
    for (Hyp& h : alive) done.push_back(std::move(h));  // max_len reached: unfinished ones compete too
    const Hyp* best = nullptr;
    double best_score = -1e300;
    for (const Hyp& h : done) {
      const double sc = h.logp / penalty(h.tokens.size() - 1);
      if (!best || sc > best_score) best = &h, best_score = sc;
    }
    std::vector<std::int32_t> out(best->tokens.begin() + 1, best->tokens.end());
    if (!out.empty() && out.back() == eos) out.pop_back();
    return out;
  }

 private:
  struct Cand {
    double score;
    int parent, token;
  };
  Program<encoder_graph> enc_;
  Program<step_graph> step_;
  KvCacheSet cache_;
  std::vector<std::int32_t> ids_, lens_;
  std::vector<int> parents_;
  std::vector<Cand> cand_;
};

}  // namespace ctgrad::models
