// Language-model batches: `batch` random windows of context + 1 tokens from a token stream;
// x = the first context tokens, y = the next ones. Window starts come from a counter-based RNG
// keyed by (seed, batch number), so batch n is the same whenever it is drawn: a resumed run sees
// the batches it would have seen.
#pragma once
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctgrad/graph/random.hpp>

namespace ctgrad::data {

class LmBatches {
 public:
  LmBatches(std::span<const std::int32_t> tokens, std::int64_t context, std::int64_t batch, std::uint64_t seed)
      : tokens_(tokens), context_(context), batch_(batch), seed_(seed) {
    if (context < 1 || batch < 1) throw std::invalid_argument("ctgrad: LmBatches needs context and batch >= 1");
    if (std::int64_t(tokens.size()) < context + 1)
      throw std::invalid_argument("ctgrad: " + std::to_string(tokens.size()) + " tokens are too few for a context of " +
                                  std::to_string(context));
    x_.resize(std::size_t(batch * context));
    y_.resize(std::size_t(batch * context));
  }
  // Fills x and y ([batch, context] each) with batch number n.
  void get(std::uint64_t n) {
    const std::uint64_t span = tokens_.size() - std::size_t(context_);
    const std::uint64_t key = random::key(seed_, n, 0x62617463ull);
    for (std::int64_t b = 0; b < batch_; ++b) {
      const std::uint64_t start = random::bits(key, std::uint64_t(b)) % span;
      for (std::int64_t t = 0; t < context_; ++t) {
        x_[std::size_t(b * context_ + t)] = tokens_[start + std::uint64_t(t)];
        y_[std::size_t(b * context_ + t)] = tokens_[start + std::uint64_t(t) + 1];
      }
    }
  }
  std::span<const std::int32_t> x() const { return x_; }
  std::span<const std::int32_t> y() const { return y_; }

 private:
  std::span<const std::int32_t> tokens_;
  std::int64_t context_, batch_;
  std::uint64_t seed_;
  std::vector<std::int32_t> x_, y_;
};

}  // namespace ctgrad::data
