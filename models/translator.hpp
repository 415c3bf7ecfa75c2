// Sequence-to-sequence decoding by beam search over an encoder-decoder's incremental graphs: the
// source is encoded once (each decoder layer's cross-attention keys and values), then each step
// feeds one token per hypothesis over the cached self-attention keys and values (KvCacheSet).
// greedy() is beam search with a beam of 1. One implementation for every encoder-decoder model:
// a model supplies its two graphs in a traits struct (TransformerDecoding, T5Decoding):
//   encoder_graph  src [B, S], src_len [B] -> "cross.<l>.k/v" [B, heads, S, d_head]
//   step_graph     ids [B, T] (and positions [T] when step_positions), src_len, "cross.<l>.k/v",
//                  "cache.<l>.k/v" -> logits [B, T, vocab], "present.<l>.k/v"
//   n_layer (decoder layers), heads, d_head, vocab
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <span>
#include <string>
#include <vector>

#include <ctgrad/graph/program.hpp>
#include <ctgrad/models/decoding.hpp>

namespace ctgrad::models {

struct BeamOptions {
  int beam = 4;         // 1: greedy
  double alpha = 0.6;   // length penalty ((5 + |Y|) / 6)^alpha (GNMT; the paper's 0.6)
  int max_len = 64;     // generated tokens at most (the end token included)
  bool (*stop)() = nullptr;  // polled before each step: true ends the search (Ctrl-C); the best so far is returned
};

// What beam search asks of a model: the logits of the next token of each live hypothesis.
class StepDecoder {
 public:
  virtual ~StepDecoder() = default;
  // last[b]: hypothesis b's last token, sentence[b]: the sentence it translates (searches of
  // several sentences share the batch); t: tokens fed before it. Returns logits [k, vocab].
  virtual std::span<const float> step(std::span<const std::int32_t> last, std::span<const int> sentence, int t) = 0;
  // Row b of the next step continues row parents[b] of this one.
  virtual void reorder(std::span<const int> parents) = 0;
  virtual int vocab() const = 0;
};

// The tokens after `start`, up to and without `eos`: beam search with the GNMT length penalty,
// finished hypotheses kept while a live one can still beat them (exhaustive-search tested).
std::vector<std::int32_t> beam_search(StepDecoder& model, std::int32_t start, std::int32_t eos, const BeamOptions& o);
// The same search for `sentences` sentences at once, their hypotheses in one batch per step:
// each result is the one its sentence's own search gives.
std::vector<std::vector<std::int32_t>> beam_search(StepDecoder& model, int sentences, std::int32_t start, std::int32_t eos, const BeamOptions& o);

// The sizes a search needs of a model's graphs.
struct Seq2SeqShape {
  int n_layer = 1, heads = 1, d_head = 1, vocab = 1;
  bool step_positions = false;  // the step graph takes the new tokens' positions
};

// A model's translation of source token sequences: greedy and beam search (a Transformer's over
// key/value caches below, an RNN's over its states: models/recurrent_translator.hpp).
class TranslationSearch {
 public:
  virtual ~TranslationSearch() = default;
  // Several sentences at once; each result is its sentence's own search's.
  virtual std::vector<std::vector<std::int32_t>> search_batch(std::span<const std::vector<std::int32_t>> srcs, std::int32_t start,
                                                              std::int32_t eos, const BeamOptions& o) = 0;
  std::vector<std::int32_t> greedy(std::span<const std::int32_t> src, std::int32_t start, std::int32_t eos, int max_len = 64) {
    return search(src, start, eos, BeamOptions{.beam = 1, .alpha = 0, .max_len = max_len});
  }
  std::vector<std::int32_t> search(std::span<const std::int32_t> src, std::int32_t start, std::int32_t eos, const BeamOptions& o) {
    const std::vector<std::int32_t> one(src.begin(), src.end());
    return search_batch(std::span<const std::vector<std::int32_t>>(&one, 1), start, eos, o)[0];
  }

 protected:
  // The sources padded to the longest ([B, S] row-major, 0 past each length), their lengths;
  // an empty source or a token outside [0, vocab) is an error naming it.
  static std::int64_t pad_sources(std::span<const std::vector<std::int32_t>> srcs, int vocab, std::vector<std::int32_t>& padded,
                                  std::vector<std::int32_t>& lens) {
    std::int64_t S = 0;
    lens.assign(srcs.size(), 0);
    for (std::size_t b = 0; b < srcs.size(); ++b) {
      if (srcs[b].empty()) throw std::invalid_argument("ctgrad: Translator: empty source (sentence " + std::to_string(b) + ")");
      for (std::size_t i = 0; i < srcs[b].size(); ++i)
        if (srcs[b][i] < 0 || srcs[b][i] >= vocab)
          throw std::invalid_argument("ctgrad: Translator: source token " + std::to_string(srcs[b][i]) + " at position " + std::to_string(i) +
                                      " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
      lens[b] = std::int32_t(srcs[b].size());
      S = std::max<std::int64_t>(S, std::int64_t(srcs[b].size()));
    }
    padded.assign(srcs.size() * std::size_t(S), 0);
    for (std::size_t b = 0; b < srcs.size(); ++b) std::copy(srcs[b].begin(), srcs[b].end(), padded.begin() + std::ptrdiff_t(b * std::size_t(S)));
    return S;
  }
};

// Beam search over an encoder program and a step program (any compiled pair of a model's graphs).
class Seq2SeqSearch : public TranslationSearch, private StepDecoder {
 public:
  // Copies the weights, by name, into both programs.
  Seq2SeqSearch(std::unique_ptr<Executor<float>> encoder, std::unique_ptr<Executor<float>> step, const Seq2SeqShape& shape,
                std::span<const Parameter<float>> weights)
      : enc_(std::move(encoder)), step_(std::move(step)), m_(shape), cache_(shape.n_layer, shape.heads, shape.d_head) {
    copy_weights(weights, *enc_, "Translator");
    copy_weights(weights, *step_, "Translator");
  }

  using TranslationSearch::greedy;
  using TranslationSearch::search;
  // Several sentences at once: one encoder pass over them (padded), then each step decodes every
  // live hypothesis of every sentence in one batch. The results are each sentence's own search's.
  std::vector<std::vector<std::int32_t>> search_batch(std::span<const std::vector<std::int32_t>> srcs, std::int32_t start, std::int32_t eos,
                                                      const BeamOptions& o) override {
    const std::int64_t B = std::int64_t(srcs.size());
    if (B == 0) return {};
    S_ = pad_sources(srcs, m_.vocab, padded_, lens_);  // past each length: masked by the lengths
    enc_->set_input("src", std::span<const std::int32_t>(padded_), {B, S_});
    enc_->set_input("src_len", std::span<const std::int32_t>(lens_), {B});
    enc_->forward(Mode::infer);
    cross_.assign(2 * std::size_t(m_.n_layer), {});
    for (int c = 0; c < 2 * m_.n_layer; ++c) {  // [B, heads, S, d_head]
      const auto t = enc_->output(cross_name(c));
      cross_[std::size_t(c)].assign(t.data, t.data + t.numel);
    }
    cache_.clear();
    rows_.clear();
    return beam_search(*this, int(B), start, eos, o);
  }

 private:
  static std::string cross_name(int c) { return "cross." + std::to_string(c / 2) + (c % 2 ? ".v" : ".k"); }

  std::span<const float> step(std::span<const std::int32_t> last, std::span<const int> sentence, int t) override {
    const std::int64_t k = std::int64_t(last.size());
    const std::int32_t pos = std::int32_t(t);
    row_lens_.resize(std::size_t(k));
    for (std::int64_t r = 0; r < k; ++r) row_lens_[std::size_t(r)] = lens_[std::size_t(sentence[std::size_t(r)])];
    step_->set_input("ids", last, {k, 1});
    if (m_.step_positions) step_->set_input("positions", std::span<const std::int32_t>(&pos, 1), {1});
    step_->set_input("src_len", std::span<const std::int32_t>(row_lens_), {k});
    if (!std::equal(rows_.begin(), rows_.end(), sentence.begin(), sentence.end())) {  // kept by the program until the rows change
      rows_.assign(sentence.begin(), sentence.end());
      const std::size_t one = std::size_t(m_.heads * S_ * m_.d_head);
      for (int c = 0; c < 2 * m_.n_layer; ++c) {
        rep_.resize(std::size_t(k) * one);
        for (std::int64_t r = 0; r < k; ++r) {
          const float* from = cross_[std::size_t(c)].data() + std::size_t(sentence[std::size_t(r)]) * one;
          std::copy(from, from + one, rep_.begin() + std::ptrdiff_t(std::size_t(r) * one));
        }
        step_->set_input(cross_name(c), std::span<const float>(rep_), {k, m_.heads, S_, m_.d_head});
      }
    }
    cache_.feed(*step_, k, 1);
    step_->forward(Mode::infer);
    cache_.collect(*step_);
    const auto logits = step_->output("logits");  // [k, 1, vocab]
    return {logits.data, std::size_t(logits.numel)};
  }
  void reorder(std::span<const int> parents) override { cache_.reorder(parents); }
  int vocab() const override { return m_.vocab; }

  std::unique_ptr<Executor<float>> enc_, step_;
  Seq2SeqShape m_;
  KvCacheSet cache_;
  std::int64_t S_ = 0;                      // the longest source of the batch
  std::vector<std::int32_t> lens_, padded_, row_lens_;
  std::vector<int> rows_;                   // the sentence of each row the cross inputs hold
  std::vector<std::vector<float>> cross_;   // per layer and K/V: [B, heads, S, d_head]
  std::vector<float> rep_;
};

// The search over one model's compile-time graphs (a traits struct M, see above).
template <class M>
class Seq2SeqTranslator : public Seq2SeqSearch {
 public:
  static constexpr const auto& encoder_graph = M::encoder_graph;
  static constexpr const auto& step_graph = M::step_graph;

  explicit Seq2SeqTranslator(std::span<const Parameter<float>> weights, Options opts = {})
      : Seq2SeqSearch(std::make_unique<Program<M::encoder_graph>>(opts), std::make_unique<Program<M::step_graph>>(opts),
                      {M::n_layer, M::heads, M::d_head, M::vocab, M::step_positions}, weights) {}
};

}  // namespace ctgrad::models
