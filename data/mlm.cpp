#include <ctgrad/data/mlm.hpp>
#include <ctgrad/base/random.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ctgrad::data {

std::vector<std::vector<std::int32_t>> pack_units(const std::vector<std::vector<std::int32_t>>& units, std::size_t max_tokens) {
  if (max_tokens == 0) throw std::invalid_argument("ctgrad: pack_units needs max_tokens >= 1");
  std::vector<std::vector<std::int32_t>> out;
  std::vector<std::int32_t> cur;
  for (const auto& u : units) {
    if (u.empty()) continue;
    if (!cur.empty() && cur.size() + u.size() > max_tokens) out.push_back(std::move(cur)), cur.clear();
    if (u.size() <= max_tokens) {
      cur.insert(cur.end(), u.begin(), u.end());
      continue;
    }
    for (std::size_t at = 0; at < u.size(); at += max_tokens) {  // a unit longer than a sequence: pieces
      std::vector<std::int32_t> piece(u.begin() + std::ptrdiff_t(at), u.begin() + std::ptrdiff_t(std::min(u.size(), at + max_tokens)));
      if (piece.size() == max_tokens) out.push_back(std::move(piece));
      else cur = std::move(piece);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::size_t mask_row(std::span<std::int32_t> tokens, std::uint64_t key, const MaskingOptions& o, const MlmSpecials& sp,
                     std::span<const std::uint8_t> word_starts, std::int32_t offset, std::vector<std::int32_t>& picks,
                     std::vector<std::int32_t>& targets) {
  auto special = [&](std::int32_t id) { return id < sp.first_regular; };
  // Candidates, grouped into words (a token is its own word unless whole-word masking is on).
  std::vector<std::pair<std::size_t, std::size_t>> words;  // [begin, end) positions
  std::size_t candidates = 0;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    if (special(tokens[t])) continue;
    ++candidates;
    const bool continues = o.whole_word && !words.empty() && words.back().second == t && std::size_t(tokens[t]) < word_starts.size() &&
                           !word_starts[std::size_t(tokens[t])];
    if (continues) words.back().second = t + 1;
    else words.push_back({t, t + 1});
  }
  if (candidates == 0) return 0;
  const std::size_t want = std::max<std::size_t>(1, std::size_t(std::lround(o.select * double(candidates))));
  // A random order of the words (a sort by a keyed random number); whole words are taken while
  // they fit in the budget, as BERT's whole-word masking does.
  std::vector<std::pair<std::uint64_t, std::size_t>> order(words.size());
  for (std::size_t w = 0; w < words.size(); ++w) order[w] = {random::bits(key, w), w};
  std::sort(order.begin(), order.end());
  std::vector<std::size_t> chosen;
  for (const auto& [r, w] : order) {
    const std::size_t n = words[w].second - words[w].first;
    if (chosen.size() >= want) break;
    if (chosen.size() + n > want) continue;
    for (std::size_t t = words[w].first; t < words[w].second; ++t) chosen.push_back(t);
  }
  if (chosen.empty()) chosen.push_back(words[order.front().second].first);  // one word longer than the budget: its first token
  std::sort(chosen.begin(), chosen.end());
  const std::uint64_t k2 = random::mix(key ^ 0x6d61736bull);
  for (std::size_t t : chosen) {
    picks.push_back(offset + std::int32_t(t));
    targets.push_back(tokens[t]);
    const double u = random::uniform(k2, 2 * t);
    if (u < o.to_mask) tokens[t] = sp.mask;
    else if (u < o.to_mask + o.to_random)
      tokens[t] = sp.first_regular + std::int32_t(random::bits(k2, 2 * t + 1) % std::uint64_t(sp.vocab - sp.first_regular));
  }
  return chosen.size();
}

MlmBatches::MlmBatches(const std::vector<std::vector<std::int32_t>>& sequences, MlmSpecials specials, MaskingOptions options,
                       std::int64_t batch, std::uint64_t seed, std::vector<std::uint8_t> word_starts)
    : sequences_(sequences), sp_(specials), o_(options), batch_(batch), seed_(seed), word_starts_(std::move(word_starts)) {
  if (batch < 1) throw std::invalid_argument("ctgrad: MlmBatches needs a batch >= 1");
  if (sequences.empty()) throw std::invalid_argument("ctgrad: MlmBatches has no sequences");
  if (sp_.vocab <= sp_.first_regular) throw std::invalid_argument("ctgrad: MlmBatches: the vocabulary has no regular tokens");
  if (o_.whole_word && word_starts_.empty()) throw std::invalid_argument("ctgrad: whole-word masking needs the word starts");
}

void MlmBatches::next_sentence(std::vector<std::uint8_t> has_next) {
  if (has_next.size() != sequences_.size())
    throw std::invalid_argument("ctgrad: MlmBatches::next_sentence: " + std::to_string(has_next.size()) + " flags for " +
                                std::to_string(sequences_.size()) + " sequences");
  // With 2, the only "random other" of a sequence with a continuation would be that continuation.
  if (sequences_.size() < 3) throw std::invalid_argument("ctgrad: next-sentence pairs need at least 3 sequences");
  has_next_ = std::move(has_next);
}

void MlmBatches::draw(std::uint64_t n) {
  const std::uint64_t key = random::key(seed_, n, 0x6d6c6dull);
  std::vector<std::size_t> which(static_cast<std::size_t>(batch_));
  for (std::size_t b = 0; b < which.size(); ++b) which[b] = std::size_t(random::bits(key, b) % sequences_.size());
  build(which, random::mix(key ^ 1));
}

void MlmBatches::rows(std::int64_t first, std::int64_t count) {
  if (first < 0 || count < 1 || std::size_t(first + count) > sequences_.size())
    throw std::invalid_argument("ctgrad: MlmBatches::rows " + std::to_string(first) + " + " + std::to_string(count) + " of " +
                                std::to_string(sequences_.size()));
  std::vector<std::size_t> which(static_cast<std::size_t>(count));
  for (std::size_t b = 0; b < which.size(); ++b) which[b] = std::size_t(first) + b;
  build(which, random::key(seed_, 0x76616cull, std::uint64_t(first)));  // fixed masks for validation
}

void MlmBatches::build(std::span<const std::size_t> which, std::uint64_t mask_key) {
  rows_ = std::int64_t(which.size());
  // Next-sentence mode: the second sequence of each row, and its label.
  std::vector<std::size_t> second(which.size());
  next_labels_.assign(has_next_.empty() ? 0 : which.size(), 0);
  const std::uint64_t pair_key = random::mix(mask_key ^ 0x6e7370ull);
  for (std::size_t b = 0; b < next_labels_.size(); ++b) {
    const std::size_t a = which[b], n = sequences_.size();
    if (has_next_[a] && random::uniform(pair_key, 2 * b) < 0.5) {
      second[b] = a + 1, next_labels_[b] = 1;
    } else {  // a random sequence other than A and the one after it (when n > 2)
      std::uint64_t c = 0;
      do second[b] = std::size_t(random::bits(pair_key ^ (c << 32), 2 * b + 1) % n);
      while (++c < 64 && (second[b] == a || (n > 2 && second[b] == a + 1 && has_next_[a])));
    }
  }
  auto length = [&](std::size_t b) {
    return sequences_[which[b]].size() + 2 + (has_next_.empty() ? 0 : sequences_[second[b]].size() + 1);
  };
  seq_ = 0;
  for (std::size_t b = 0; b < which.size(); ++b) seq_ = std::max<std::int64_t>(seq_, std::int64_t(length(b)));
  ids_.assign(std::size_t(rows_ * seq_), sp_.pad);
  segments_.assign(ids_.size(), 0);
  lengths_.assign(std::size_t(rows_), 0);
  picks_.clear(), targets_.clear();
  for (std::size_t b = 0; b < which.size(); ++b) {
    const auto& s = sequences_[which[b]];
    std::int32_t* row = ids_.data() + b * std::size_t(seq_);
    row[0] = sp_.cls;
    std::copy(s.begin(), s.end(), row + 1);
    row[s.size() + 1] = sp_.sep;
    if (!has_next_.empty()) {
      const auto& s2 = sequences_[second[b]];
      std::copy(s2.begin(), s2.end(), row + s.size() + 2);
      row[s.size() + s2.size() + 2] = sp_.sep;
      std::fill_n(segments_.begin() + std::ptrdiff_t(b * std::size_t(seq_) + s.size() + 2), s2.size() + 1, 1);
    }
    lengths_[b] = std::int32_t(length(b));
    mask_row(std::span<std::int32_t>(row, length(b)), random::bits(mask_key, b), o_, sp_, word_starts_,
             std::int32_t(b * std::size_t(seq_)), picks_, targets_);
  }
}

}  // namespace ctgrad::data
