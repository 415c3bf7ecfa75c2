#include <ctgrad/models/sampling.hpp>
#include <ctgrad/base/random.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ctgrad::models {

void check(const SamplingOptions& o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    throw std::invalid_argument("ctgrad: sampling: temperature must be >= 0, got " + std::to_string(o.temperature));
  if (o.top_k < 0) throw std::invalid_argument("ctgrad: sampling: top-k must be >= 0, got " + std::to_string(o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1)) throw std::invalid_argument("ctgrad: sampling: top-p must be in (0, 1], got " + std::to_string(o.top_p));
  if (o.max_tokens < 0) throw std::invalid_argument("ctgrad: sampling: max tokens must be >= 0, got " + std::to_string(o.max_tokens));
  if (o.context < 0) throw std::invalid_argument("ctgrad: sampling: context must be >= 0, got " + std::to_string(o.context));
}

std::int32_t sample_token(std::span<const float> logits, std::int32_t n_valid, const SamplingOptions& o, std::uint64_t draw,
                          std::vector<std::pair<double, std::int32_t>>& work) {
  const std::int32_t n = std::min<std::int32_t>(n_valid, std::int32_t(logits.size()));
  if (n < 1) throw std::invalid_argument("ctgrad: sampling: no tokens to choose from");
  for (std::int32_t v = 0; v < n; ++v)
    if (!std::isfinite(logits[std::size_t(v)]))
      throw std::invalid_argument("ctgrad: sampling: logit of token " + std::to_string(v) + " is " + std::to_string(logits[std::size_t(v)]));
  const auto top_it = std::max_element(logits.begin(), logits.begin() + n);
  if (o.temperature == 0) return std::int32_t(top_it - logits.begin());
  work.clear();
  // Shifted by the largest logit before dividing, so a tiny temperature cannot overflow.
  for (std::int32_t v = 0; v < n; ++v) work.emplace_back((double(logits[std::size_t(v)]) - double(*top_it)) / o.temperature, v);
  // Most likely first; ties by token id, so the order (and the draw) does not depend on the sort.
  std::sort(work.begin(), work.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::size_t keep = o.top_k > 0 ? std::min<std::size_t>(std::size_t(o.top_k), work.size()) : work.size();
  const double top = work[0].first;
  double total = 0;
  for (std::size_t i = 0; i < keep; ++i) total += work[i].first = std::exp(work[i].first - top);
  if (o.top_p < 1) {
    double cum = 0;
    for (std::size_t i = 0; i < keep; ++i)
      if ((cum += work[i].first) >= o.top_p * total) {
        keep = i + 1, total = cum;
        break;
      }
  }
  double u = random::uniform(random::key(o.seed, "sample"), draw) * total;
  for (std::size_t i = 0; i < keep; ++i)
    if ((u -= work[i].first) < 0) return work[i].second;
  return work[keep - 1].second;
}

}  // namespace ctgrad::models
