// Sampling text from a decoder-only language model with a key/value cache (LmSampler), for any
// model family whose decoding graph follows the convention below (models/gpt.hpp, llama.hpp).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ctgrad/graph/executor.hpp>
#include <ctgrad/models/decoding.hpp>
#include <ctgrad/models/sampling.hpp>

namespace ctgrad::models {

// Text generation with a key/value cache for a decoder-only language model: the prompt is read in
// one decoding step, then each new token is one step of Seq 1 over the cached keys and values of
// everything before it. The decoding graph takes "ids" [1, T] (and "positions" [T] when the model
// has positions) and the caches "cache.<l>.k/v" [1, cache_heads, past + T, d_head], and returns
// "logits" [1, T, vocab] and "present.<l>.k/v" (models/decoding.hpp).
// A recurrent layer's decoding (a state-space mixer) takes "state.<l>" [1, state_shape...], its
// state after the tokens before (zeros at the start), and returns "next.<l>" after the new ones.
struct LmDecoderShape {
  int layers = 1, cache_heads = 1, d_head = 1, vocab = 1, context = 1;  // layers: those with key/value caches
  bool positions = true;  // the graph takes the new tokens' positions
  int state_layers = 0;
  std::vector<std::int64_t> state_shape;
};

class LmSampler {
 public:
  // Copies the weights, by name, from the trained model (`who` names the sampler in errors).
  LmSampler(std::unique_ptr<Executor<float>> decoder, const LmDecoderShape& c, std::span<const Parameter<float>> weights, std::string who)
      : prog_(std::move(decoder)), c_(c), who_(std::move(who)), cache_(c.layers, c.cache_heads, c.d_head) {
    copy_weights(weights, *prog_, who_.c_str());
  }
  virtual ~LmSampler() = default;

  // Appends up to o.max_tokens sampled tokens to `tokens` (a non-empty prompt) and calls
  // on_token(id) for each (one that returns bool stops the generation by returning false). Ids >= n_valid (padding of the vocabulary) are never drawn. The window
  // read is at most o.context tokens (the trained context; 0: the model's context).
  template <class OnToken>
  void generate(std::vector<std::int32_t>& tokens, std::int32_t n_valid, const SamplingOptions& o, OnToken on_token) {
    check(o);
    const std::size_t limit = std::size_t(o.context > 0 ? o.context : c_.context);
    if (limit > std::size_t(c_.context))
      throw std::invalid_argument("ctgrad: " + who_ + ": context " + std::to_string(limit) + " exceeds the model's " + std::to_string(c_.context));
    if (tokens.empty()) throw std::invalid_argument("ctgrad: " + who_ + ": the prompt is empty");
    if (tokens.size() > limit)
      throw std::invalid_argument("ctgrad: " + who_ + ": the prompt has " + std::to_string(tokens.size()) +
                                  " tokens, more than the model's context of " + std::to_string(limit));
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || tokens[i] >= n_valid)
        throw std::invalid_argument("ctgrad: " + who_ + ": prompt token " + std::to_string(tokens[i]) + " at position " +
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
    prog_->set_input("ids", ids, {1, T});
    if (c_.positions) {
      positions_.resize(std::size_t(T));
      for (std::int64_t t = 0; t < T; ++t) positions_[std::size_t(t)] = std::int32_t(past + t);
      prog_->set_input("positions", std::span<const std::int32_t>(positions_), {T});
    }
    if (past == 0) cache_.clear();
    cache_.feed(*prog_, 1, T);
    if (c_.state_layers > 0) {
      std::vector<std::int64_t> dims{1};
      dims.insert(dims.end(), c_.state_shape.begin(), c_.state_shape.end());
      std::int64_t n = 1;
      for (auto d : c_.state_shape) n *= d;
      states_.resize(std::size_t(c_.state_layers));
      for (int l = 0; l < c_.state_layers; ++l) {
        auto& st = states_[std::size_t(l)];
        if (past == 0) st.assign(std::size_t(n), 0.0f);
        prog_->set_input("state." + std::to_string(l), std::span<const float>(st), std::span<const std::int64_t>(dims));
      }
    }
    prog_->forward(Mode::infer);
    cache_.collect(*prog_);
    for (int l = 0; l < c_.state_layers; ++l) {
      const auto next = prog_->output("next." + std::to_string(l));
      states_[std::size_t(l)].assign(next.data, next.data + next.numel);
    }
  }

  std::unique_ptr<Executor<float>> prog_;
  LmDecoderShape c_;
  std::string who_;
  KvCacheSet cache_;
  std::vector<std::int32_t> positions_;
  std::vector<std::vector<float>> states_;  // per recurrent layer: its state after the tokens so far
};

}  // namespace ctgrad::models
