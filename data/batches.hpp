// Language-model batches: `batch` random windows of context + 1 tokens from a token stream;
// x = the first context tokens, y = the next ones. Window starts come from a counter-based RNG
// keyed by (seed, batch number), so batch n is the same whenever it is drawn: a resumed run sees
// the batches it would have seen.
#pragma once
#include <algorithm>
#include <cstring>
#include <cstdint>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ctgrad/base/random.hpp>

namespace ctgrad::data {

// Keeps the first n items of a fixed random order of `items` (keyed by `name` alone: the same
// subset for every seed), in that order: a label or data budget that does not move between runs.
template <class T>
void fixed_subset(std::vector<T>& items, std::size_t n, std::string_view name) {
  if (n >= items.size()) return;
  std::vector<std::pair<std::uint64_t, std::size_t>> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = {random::bits(random::key(0, name), i), i};
  std::sort(order.begin(), order.end());
  std::vector<T> kept;
  kept.reserve(n);
  for (std::size_t i = 0; i < n; ++i) kept.push_back(std::move(items[order[i].second]));
  items = std::move(kept);
}

class ShardFile;  // data/token_shards.hpp

// A run of token ids a window may not leave: a document of a corpus in memory, or a token shard
// read from its file a window at a time (data/token_shards.hpp).
struct TokenPiece {
  const std::int32_t* ids = nullptr;  // in memory, or
  const ShardFile* shard = nullptr;   // in a shard file
  std::uint64_t size = 0;
  // Ids [start, start + n) into out.
  void read(std::uint64_t start, std::size_t n, std::int32_t* out) const {
    if (shard) return read_shard(start, n, out);
    std::memcpy(out, ids + start, n * sizeof(std::int32_t));
  }

 private:
  void read_shard(std::uint64_t start, std::size_t n, std::int32_t* out) const;  // data/token_shards.cpp
};

// The pieces of a stream of `tokens` whose documents start at `starts` (ascending, from 0).
inline std::vector<TokenPiece> document_pieces(std::span<const std::int32_t> tokens, std::span<const std::size_t> starts) {
  std::vector<TokenPiece> out;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t end = i + 1 < starts.size() ? starts[i + 1] : tokens.size();
    out.push_back({.ids = tokens.data() + starts[i], .size = end - starts[i]});
  }
  return out;
}

class LmBatches {
 public:
  LmBatches(std::span<const std::int32_t> tokens, std::int64_t context, std::int64_t batch, std::uint64_t seed)
      : LmBatches(std::vector<TokenPiece>{{.ids = tokens.data(), .size = tokens.size()}}, context, batch, seed) {}
  // Windows drawn uniformly over every start that keeps a window within one piece.
  LmBatches(std::vector<TokenPiece> pieces, std::int64_t context, std::int64_t batch, std::uint64_t seed)
      : pieces_(std::move(pieces)), context_(context), batch_(batch), seed_(seed) {
    if (context < 1 || batch < 1) throw std::invalid_argument("ctgrad: LmBatches needs context and batch >= 1");
    std::uint64_t total = 0, longest = 0;
    for (const TokenPiece& p : pieces_) {
      longest = std::max(longest, p.size);
      if (p.size > std::uint64_t(context)) total += p.size - std::uint64_t(context);
      ends_.push_back(total);
    }
    if (total == 0)
      throw std::invalid_argument("ctgrad: " + std::to_string(longest) + " tokens" + (pieces_.size() > 1 ? " (the longest document)" : "") +
                                  " are too few for a context of " + std::to_string(context));
    x_.resize(std::size_t(batch * context));
    y_.resize(std::size_t(batch * context));
    window_.resize(std::size_t(context + 1));
  }
  // Fills x and y ([batch, context] each) with batch number n.
  void get(std::uint64_t n) {
    const std::uint64_t key = random::key(seed_, n, 0x62617463ull);
    for (std::int64_t b = 0; b < batch_; ++b) {
      std::uint64_t start = random::bits(key, std::uint64_t(b)) % ends_.back();
      const std::size_t k = std::size_t(std::upper_bound(ends_.begin(), ends_.end(), start) - ends_.begin());
      if (k > 0) start -= ends_[k - 1];
      pieces_[k].read(start, window_.size(), window_.data());
      std::copy(window_.begin(), window_.end() - 1, x_.begin() + b * context_);
      std::copy(window_.begin() + 1, window_.end(), y_.begin() + b * context_);
    }
  }
  std::span<const std::int32_t> x() const { return x_; }
  std::span<const std::int32_t> y() const { return y_; }

 private:
  std::vector<TokenPiece> pieces_;
  std::vector<std::uint64_t> ends_;  // cumulative window starts: piece k's are [ends_[k-1], ends_[k])
  std::int64_t context_, batch_;
  std::uint64_t seed_;
  std::vector<std::int32_t> x_, y_, window_;
};

// Consecutive windows of `context` (+1 target) tokens over each piece, every position scored once
// within a piece: validation's windows. At most `limit` (0: all).
struct Window {
  std::size_t piece;
  std::uint64_t start;
};
inline std::vector<Window> consecutive_windows(std::span<const TokenPiece> pieces, std::int64_t context, std::uint64_t limit = 0) {
  std::vector<Window> out;
  for (std::size_t k = 0; k < pieces.size(); ++k)
    for (std::uint64_t w = 0; pieces[k].size > 0 && w < (pieces[k].size - 1) / std::uint64_t(context); ++w) {
      if (limit && out.size() >= limit) return out;
      out.push_back({k, w * std::uint64_t(context)});
    }
  return out;
}

// Example batches (fine-tuning): the i-th example of an endless stream of epochs over n examples,
// each epoch a permutation keyed by (seed, epoch, salt). A function of i alone, so a resumed run
// sees the examples it would have seen.
class EpochOrder {
 public:
  EpochOrder(std::size_t n = 0, std::uint64_t seed = 0, std::uint64_t salt = 0) : n_(n), seed_(seed), salt_(salt) {}
  std::size_t operator()(std::uint64_t i) {
    if (n_ == 0) throw std::invalid_argument("ctgrad: EpochOrder over no examples");
    const std::uint64_t epoch = i / n_;
    if (epoch != epoch_ || order_.empty()) {
      order_.resize(n_);
      std::iota(order_.begin(), order_.end(), std::size_t(0));
      const std::uint64_t k = random::key(seed_, epoch, salt_);
      for (std::uint64_t j = n_ - 1; j > 0; --j) std::swap(order_[j], order_[random::bits(k, j) % (j + 1)]);  // Fisher-Yates
      epoch_ = epoch;
    }
    return order_[i % n_];
  }
  // The rows of step s's batch (s from 1): items (s - 1) * batch ... s * batch - 1 of the order.
  std::vector<std::size_t> batch_rows(std::int64_t step, std::int64_t batch) {
    std::vector<std::size_t> rows(static_cast<std::size_t>(batch));
    for (std::int64_t j = 0; j < batch; ++j) rows[std::size_t(j)] = (*this)(std::uint64_t((step - 1) * batch + j));
    return rows;
  }

 private:
  std::size_t n_;
  std::uint64_t seed_, salt_, epoch_ = 0;
  std::vector<std::size_t> order_;
};

}  // namespace ctgrad::data
