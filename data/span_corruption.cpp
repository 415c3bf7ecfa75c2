#include <ctgrad/data/span_corruption.hpp>
#include <ctgrad/base/random.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ctgrad::data {

namespace {

// tf.math.round on binary32: halves to even (std::nearbyint in the default rounding mode).
std::int64_t round_f32(float x) { return std::int64_t(std::nearbyint(x)); }

void check(const SpanCorruptionOptions& o) {
  if (!(o.noise_density > 0 && o.noise_density < 1))
    throw std::invalid_argument("ctgrad: span corruption: noise density " + std::to_string(o.noise_density) + " is not in (0, 1)");
  if (!(o.mean_span >= 1)) throw std::invalid_argument("ctgrad: span corruption: mean span length " + std::to_string(o.mean_span) + " is below 1");
}

// `parts` positive lengths summing to `total`, uniformly among all such compositions: parts - 1
// distinct cut points among the total - 1 gaps (the reference's _random_segmentation).
void random_composition(std::int64_t total, std::int64_t parts, std::uint64_t key, std::vector<std::int64_t>& out) {
  std::vector<std::int64_t> gaps(std::size_t(total - 1));
  for (std::int64_t i = 0; i < total - 1; ++i) gaps[std::size_t(i)] = i + 1;
  for (std::int64_t i = 0; i < parts - 1; ++i) {  // partial Fisher-Yates: the first parts - 1 gaps
    const std::int64_t j = i + std::int64_t(random::bits(key, std::uint64_t(i)) % std::uint64_t(total - 1 - i));
    std::swap(gaps[std::size_t(i)], gaps[std::size_t(j)]);
  }
  std::sort(gaps.begin(), gaps.begin() + (parts - 1));
  out.clear();
  std::int64_t prev = 0;
  for (std::int64_t i = 0; i < parts - 1; ++i) out.push_back(gaps[std::size_t(i)] - prev), prev = gaps[std::size_t(i)];
  out.push_back(total - prev);
}

}  // namespace

SpanCounts span_counts(std::int64_t length, const SpanCorruptionOptions& o) {
  check(o);
  if (length < 2) throw std::invalid_argument("ctgrad: span corruption needs at least 2 tokens, got " + std::to_string(length));
  SpanCounts c;
  c.noise = std::clamp<std::int64_t>(round_f32(float(length) * float(o.noise_density)), 1, length - 1);
  c.spans = std::max<std::int64_t>(round_f32(float(c.noise) / float(o.mean_span)), 1);
  c.spans = std::min(c.spans, length - c.noise);  // room for a kept token between spans (densities near 1)
  return c;
}

SpanLengths span_corruption_lengths(std::int64_t inputs_length, const SpanCorruptionOptions& o) {
  if (inputs_length < 4)
    throw std::invalid_argument("ctgrad: span corruption: an input length of " + std::to_string(inputs_length) + " leaves no room (at least 4)");
  auto sizes = [&](std::int64_t tokens) {
    const SpanCounts c = span_counts(tokens, o);
    return std::pair{tokens - c.noise + (c.spans + 1) + 1, c.noise + (c.spans + 1) + 1};  // + 1 span at the cut, + EOS
  };
  std::int64_t tokens = 2;
  // The kept tokens grow by at least one per 1/(1 - density) tokens; the bound stops a density so
  // close to 1 that binary32 rounds it to 1 (nothing is ever kept, the input never fills).
  const std::int64_t bound = std::int64_t(double(inputs_length) / std::max(1e-3, 1 - o.noise_density)) + 64;
  while (tokens < bound && sizes(tokens + 1).first <= inputs_length) ++tokens;
  if (sizes(tokens).first > inputs_length)
    throw std::invalid_argument("ctgrad: span corruption: no sequence fits an input of " + std::to_string(inputs_length) + " tokens");
  // The target is longest at the longest sequence (noise grows with length).
  return {tokens, sizes(tokens).first, sizes(tokens).second};
}

std::vector<std::uint8_t> noise_mask(std::int64_t length, std::uint64_t key, const SpanCorruptionOptions& o) {
  const SpanCounts c = span_counts(length, o);
  std::vector<std::int64_t> noise, kept;
  random_composition(c.noise, c.spans, random::mix(key ^ 0x6e6f697365ull), noise);
  random_composition(length - c.noise, c.spans, random::mix(key ^ 0x6b657074ull), kept);
  // Around the circle: noise span i, then kept span i; then position 0 of the sequence is circle
  // position `rotation`. The reference: kept span i, then noise span i, from position 0.
  std::vector<std::uint8_t> circle;
  circle.reserve(std::size_t(length));
  for (std::size_t i = 0; i < noise.size(); ++i) {
    if (o.reference_placement) circle.insert(circle.end(), std::size_t(kept[i]), 0);
    circle.insert(circle.end(), std::size_t(noise[i]), 1);
    if (!o.reference_placement) circle.insert(circle.end(), std::size_t(kept[i]), 0);
  }
  const std::int64_t rotation = o.reference_placement ? 0 : std::int64_t(random::bits(key, 0x726f74ull) % std::uint64_t(length));
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < length; ++i) mask[std::size_t(i)] = circle[std::size_t((i + rotation) % length)];
  return mask;
}

std::int64_t corrupt_spans(std::span<const std::int32_t> tokens, std::span<const std::uint8_t> mask, std::int32_t first_sentinel,
                           std::int32_t eos, std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets, std::int64_t sentinels) {
  if (mask.size() != tokens.size())
    throw std::invalid_argument("ctgrad: corrupt_spans: " + std::to_string(mask.size()) + " mask entries for " + std::to_string(tokens.size()) + " tokens");
  inputs.clear(), targets.clear();
  std::int64_t spans = 0;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    if (!mask[t]) {
      inputs.push_back(tokens[t]);
      continue;
    }
    if (t == 0 || !mask[t - 1]) {  // a span starts: one sentinel in both
      if (spans == sentinels)
        throw std::invalid_argument("ctgrad: corrupt_spans: more than " + std::to_string(sentinels) + " spans in a sequence of " +
                                    std::to_string(tokens.size()) + " tokens: there are only " + std::to_string(sentinels) + " sentinels");
      const std::int32_t sentinel = first_sentinel - std::int32_t(spans++);
      inputs.push_back(sentinel), targets.push_back(sentinel);
    }
    targets.push_back(tokens[t]);
  }
  inputs.push_back(eos), targets.push_back(eos);
  return spans;
}

SpanCorruptionBatches::SpanCorruptionBatches(const std::vector<std::vector<std::int32_t>>& sequences, Ids ids, SpanCorruptionOptions o,
                                             std::int64_t batch, std::uint64_t seed)
    : sequences_(sequences), ids_(ids), o_(o), batch_(batch), seed_(seed) {
  check(o);
  if (batch < 1) throw std::invalid_argument("ctgrad: SpanCorruptionBatches needs a batch >= 1");
  if (sequences.empty()) throw std::invalid_argument("ctgrad: SpanCorruptionBatches has no sequences");
  for (std::size_t i = 0; i < sequences.size(); ++i)
    if (sequences[i].size() < 2)
      throw std::invalid_argument("ctgrad: SpanCorruptionBatches: sequence " + std::to_string(i) + " has fewer than 2 tokens");
}

void SpanCorruptionBatches::draw(std::uint64_t n) {
  const std::uint64_t key = random::key(seed_, n, 0x7435ull);
  std::vector<std::size_t> which(static_cast<std::size_t>(batch_));
  for (std::size_t b = 0; b < which.size(); ++b) which[b] = std::size_t(random::bits(key, b) % sequences_.size());
  build(which, random::mix(key ^ 1), false);
}

void SpanCorruptionBatches::rows(std::int64_t first, std::int64_t count) {
  if (first < 0 || count < 1 || std::size_t(first + count) > sequences_.size())
    throw std::invalid_argument("ctgrad: SpanCorruptionBatches::rows " + std::to_string(first) + " + " + std::to_string(count) + " of " +
                                std::to_string(sequences_.size()));
  std::vector<std::size_t> which(static_cast<std::size_t>(count));
  for (std::size_t b = 0; b < which.size(); ++b) which[b] = std::size_t(first) + b;
  // Fixed per sequence, whatever the batch: validation sees the same masks at any batch size.
  build(which, random::key(seed_, 0x76616cull, 0), true);
}

void SpanCorruptionBatches::build(std::span<const std::size_t> which, std::uint64_t key, bool per_sequence) {
  rows_ = std::int64_t(which.size());
  std::vector<std::vector<std::int32_t>> in(which.size()), out(which.size());
  in_len_ = out_len_ = noise_ = 0;
  for (std::size_t b = 0; b < which.size(); ++b) {
    const auto& s = sequences_[which[b]];
    const std::uint64_t row_key = random::bits(key, per_sequence ? which[b] : b);
    const auto mask = noise_mask(std::int64_t(s.size()), row_key, o_);
    corrupt_spans(s, mask, ids_.first_sentinel, ids_.eos, in[b], out[b], ids_.sentinels);
    for (auto m : mask) noise_ += m;
    in_len_ = std::max<std::int64_t>(in_len_, std::int64_t(in[b].size()));
    out_len_ = std::max<std::int64_t>(out_len_, std::int64_t(out[b].size()));
  }
  inputs_.assign(std::size_t(rows_ * in_len_), ids_.pad);
  dec_in_.assign(std::size_t(rows_ * out_len_), ids_.pad);
  dec_out_.assign(std::size_t(rows_ * out_len_), ids_.pad);
  input_lengths_.resize(std::size_t(rows_));
  target_lengths_.resize(std::size_t(rows_));
  for (std::size_t b = 0; b < which.size(); ++b) {
    std::copy(in[b].begin(), in[b].end(), inputs_.begin() + std::ptrdiff_t(b * std::size_t(in_len_)));
    std::copy(out[b].begin(), out[b].end(), dec_out_.begin() + std::ptrdiff_t(b * std::size_t(out_len_)));
    std::copy(out[b].begin(), out[b].end() - 1, dec_in_.begin() + std::ptrdiff_t(b * std::size_t(out_len_) + 1));  // after the start (pad)
    input_lengths_[b] = std::int32_t(in[b].size());
    target_lengths_[b] = std::int32_t(out[b].size());
  }
}

}  // namespace ctgrad::data
