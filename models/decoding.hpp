// What incremental decoding needs beside its graphs: the weights of a trained model copied by name
// into a decoding graph's program, and host-side key/value caches.
//
// KvCacheSet: the caches of a decoding-step graph that takes "cache.<l>.k/v"
// [batch, heads, past + T, d_head] (the past rows, then room for this step's T) and returns
// "present.<l>.k/v" with the room filled. Beam search reorders the rows between steps.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <ctgrad/graph/executor.hpp>

namespace ctgrad::models {

// Copies each parameter of `to` from the entry of `from` with its name; a missing name or another
// shape is an error naming it.
inline void copy_weights(std::span<const Parameter<float>> from, Executor<float>& to, const char* who) {
  for (const auto& p : to.parameters()) {
    auto w = std::find_if(from.begin(), from.end(), [&](const auto& q) { return q.name == p.name; });
    if (w == from.end()) throw std::invalid_argument(std::string("ctgrad: ") + who + ": no weight named '" + std::string(p.name) + "'");
    if (!std::equal(p.value.shape().begin(), p.value.shape().end(), w->value.shape().begin(), w->value.shape().end()))
      throw std::invalid_argument(std::string("ctgrad: ") + who + ": weight '" + std::string(p.name) + "' has another shape");
    std::copy_n(w->value.data, p.value.numel, p.value.data);
  }
}

// Fine-tuning: copies, by name, the weights `to` shares with `from` (a pretrained encoder into a
// model with a new head) and returns how many; a shared name with another shape is an error, a
// name only `to` has keeps its initialisation.
inline int copy_matching_weights(std::span<const Parameter<float>> from, Executor<float>& to, const char* who = "copy_matching_weights") {
  int copied = 0;
  for (const auto& p : to.parameters()) {
    auto w = std::find_if(from.begin(), from.end(), [&](const auto& q) { return q.name == p.name; });
    if (w == from.end()) continue;
    if (!std::equal(p.value.shape().begin(), p.value.shape().end(), w->value.shape().begin(), w->value.shape().end()))
      throw std::invalid_argument(std::string("ctgrad: ") + who + ": weight '" + std::string(p.name) + "' has another shape");
    std::copy_n(w->value.data, p.value.numel, p.value.data);
    ++copied;
  }
  return copied;
}

class KvCacheSet {
 public:
  KvCacheSet(int layers, std::int64_t heads, std::int64_t d_head) : heads_(heads), d_head_(d_head) {
    for (int l = 0; l < layers; ++l)
      for (const char* kv : {"k", "v"}) {
        in_.push_back("cache." + std::to_string(l) + "." + kv);
        out_.push_back("present." + std::to_string(l) + "." + kv);
      }
    data_.resize(in_.size());
  }
  void clear() { past_ = 0; }
  std::int64_t past() const { return past_; }
  std::int64_t batch() const { return batch_; }

  // Sets the cache inputs for a step of T new positions over `batch` sequences.
  void feed(Executor<float>& prog, std::int64_t batch, std::int64_t T) {
    if (past_ == 0) batch_ = batch;
    if (batch != batch_) throw std::invalid_argument("ctgrad: KvCacheSet: batch " + std::to_string(batch) + " after " + std::to_string(batch_));
    const std::int64_t L = past_ + T, row = d_head_;
    staging_.assign(std::size_t(batch * heads_ * L * row), 0.0f);
    for (std::size_t c = 0; c < in_.size(); ++c) {
      for (std::int64_t bh = 0; bh < batch * heads_ && past_ > 0; ++bh)
        std::memcpy(staging_.data() + bh * L * row, data_[c].data() + bh * past_ * row, std::size_t(past_ * row) * sizeof(float));
      prog.set_input(in_[c], std::span<const float>(staging_), {batch, heads_, L, d_head_});
    }
  }
  // Keeps the step's updated caches.
  void collect(const Executor<float>& prog) {
    for (std::size_t c = 0; c < out_.size(); ++c) {
      const auto present = prog.output(out_[c]);  // [batch, heads, L, d_head]
      data_[c].assign(present.data, present.data + present.numel);
      past_ = present.size(2);
    }
  }
  // Beam search: row b of the next step continues old row parents[b].
  void reorder(std::span<const int> parents) {
    const std::size_t per = std::size_t(heads_ * past_ * d_head_);
    for (auto& d : data_) {
      std::vector<float> old = std::move(d);
      d.resize(parents.size() * per);
      for (std::size_t b = 0; b < parents.size(); ++b)
        std::memcpy(d.data() + b * per, old.data() + std::size_t(parents[b]) * per, per * sizeof(float));
    }
    batch_ = std::int64_t(parents.size());
  }

 private:
  std::int64_t heads_, d_head_, past_ = 0, batch_ = 0;
  std::vector<std::string> in_, out_;
  std::vector<std::vector<float>> data_;  // per layer and k/v: [batch, heads, past, d_head]
  std::vector<float> staging_;
};

}  // namespace ctgrad::models
