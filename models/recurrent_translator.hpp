// Greedy and beam search for an RNN encoder-decoder (models/seq2seq.hpp): the source encoded once
// (its outputs, their attention keys, each layer's final state), then one step per token, each
// hypothesis carrying its own states (reordered with the beam).
#pragma once
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <ctgrad/models/translator.hpp>

namespace ctgrad::models {

struct RecurrentShape {
  int layers = 1, hidden = 1, vocab = 1;
};

// encoder: src, src_len -> "memory", "keys" [B, S, hidden], "state.<l>" [B, hidden];
// step: ids [B], src_len, memory, keys, "state.<l>" -> logits [B, vocab], "next.<l>".
class RecurrentSearch : public TranslationSearch, private StepDecoder {
 public:
  RecurrentSearch(std::unique_ptr<Executor<float>> encoder, std::unique_ptr<Executor<float>> step, const RecurrentShape& shape,
                  std::span<const Parameter<float>> weights)
      : enc_(std::move(encoder)), step_(std::move(step)), m_(shape) {
    copy_weights(weights, *enc_, "Translator");
    copy_weights(weights, *step_, "Translator");
    for (int l = 0; l < m_.layers; ++l) state_names_.push_back("state." + std::to_string(l)), next_names_.push_back("next." + std::to_string(l));
  }
  using TranslationSearch::greedy;
  using TranslationSearch::search;

  std::vector<std::vector<std::int32_t>> search_batch(std::span<const std::vector<std::int32_t>> srcs, std::int32_t start, std::int32_t eos,
                                                      const BeamOptions& o) override {
    if (srcs.empty()) return {};
    const std::int64_t B = std::int64_t(srcs.size());
    S_ = pad_sources(srcs, m_.vocab, padded_, lens_);
    enc_->set_input("src", std::span<const std::int32_t>(padded_), {B, S_});
    enc_->set_input("src_len", std::span<const std::int32_t>(lens_), {B});
    enc_->forward(Mode::infer);
    auto keep = [](const TensorView<float>& t) { return std::vector<float>(t.data, t.data + t.numel); };
    memory_ = keep(enc_->output("memory"));
    keys_ = keep(enc_->output("keys"));
    start_.clear();
    for (const auto& n : state_names_) start_.push_back(keep(enc_->output(n)));
    rows_.clear();
    return beam_search(*this, int(B), start, eos, o);
  }

 private:
  std::span<const float> step(std::span<const std::int32_t> last, std::span<const int> sentence, int t) override {
    const std::int64_t k = std::int64_t(last.size());
    const std::size_t H = std::size_t(m_.hidden), per = std::size_t(S_) * H;
    if (t == 0) {  // each sentence's row starts from the encoder's final states
      state_.assign(std::size_t(m_.layers), std::vector<float>(std::size_t(k) * H));
      for (int l = 0; l < m_.layers; ++l)
        for (std::int64_t r = 0; r < k; ++r)
          std::memcpy(state_[std::size_t(l)].data() + std::size_t(r) * H, start_[std::size_t(l)].data() + std::size_t(sentence[std::size_t(r)]) * H,
                      H * sizeof(float));
    }
    if (!std::equal(rows_.begin(), rows_.end(), sentence.begin(), sentence.end())) {  // each row's source, kept until the rows change
      rows_.assign(sentence.begin(), sentence.end());
      row_lens_.resize(std::size_t(k));
      mem_rows_.resize(std::size_t(k) * per), key_rows_.resize(std::size_t(k) * per);
      for (std::int64_t r = 0; r < k; ++r) {
        const std::size_t s = std::size_t(sentence[std::size_t(r)]);
        row_lens_[std::size_t(r)] = lens_[s];
        std::memcpy(mem_rows_.data() + std::size_t(r) * per, memory_.data() + s * per, per * sizeof(float));
        std::memcpy(key_rows_.data() + std::size_t(r) * per, keys_.data() + s * per, per * sizeof(float));
      }
      step_->set_input("src_len", std::span<const std::int32_t>(row_lens_), {k});
      step_->set_input("memory", std::span<const float>(mem_rows_), {k, S_, m_.hidden});
      step_->set_input("keys", std::span<const float>(key_rows_), {k, S_, m_.hidden});
    }
    step_->set_input("ids", last, {k});
    for (int l = 0; l < m_.layers; ++l) step_->set_input(state_names_[std::size_t(l)], std::span<const float>(state_[std::size_t(l)]), {k, m_.hidden});
    step_->forward(Mode::infer);
    next_.resize(std::size_t(m_.layers));
    for (int l = 0; l < m_.layers; ++l) {
      const auto n = step_->output(next_names_[std::size_t(l)]);
      next_[std::size_t(l)].assign(n.data, n.data + n.numel);
    }
    const auto logits = step_->output("logits");  // [k, vocab]
    return {logits.data, std::size_t(logits.numel)};
  }
  void reorder(std::span<const int> parents) override {
    const std::size_t H = std::size_t(m_.hidden);
    for (int l = 0; l < m_.layers; ++l) {
      auto& s = state_[std::size_t(l)];
      s.resize(parents.size() * H);
      for (std::size_t b = 0; b < parents.size(); ++b)
        std::memcpy(s.data() + b * H, next_[std::size_t(l)].data() + std::size_t(parents[b]) * H, H * sizeof(float));
    }
  }
  int vocab() const override { return m_.vocab; }

  std::unique_ptr<Executor<float>> enc_, step_;
  RecurrentShape m_;
  std::vector<std::string> state_names_, next_names_;
  std::int64_t S_ = 0;
  std::vector<std::int32_t> padded_, lens_, row_lens_;
  std::vector<float> memory_, keys_, mem_rows_, key_rows_;
  std::vector<std::vector<float>> start_, state_, next_;  // per layer: the encoder's final states [B, H]; the rows' states; the step's new ones
  std::vector<int> rows_;
};

}  // namespace ctgrad::models
