#include <ctgrad/data/seq2seq_batches.hpp>

#include <algorithm>

#include <ctgrad/data/pairs.hpp>

namespace ctgrad::data {

std::int64_t Seq2SeqBatch::tokens() const {
  std::int64_t n = 0;
  for (auto l : tgt_len) n += l;
  return n;
}

Seq2SeqBatch make_batch(const std::vector<Seq2SeqExample>& ex, std::span<const std::int64_t> idx, std::int32_t pad_id) {
  std::vector<std::vector<std::int32_t>> s, ti, to;
  for (auto i : idx) {
    const auto& e = ex[std::size_t(i)];
    s.push_back(e.src);
    ti.emplace_back(e.tgt.begin(), e.tgt.end() - 1);
    to.emplace_back(e.tgt.begin() + 1, e.tgt.end());
  }
  const auto ps = data::pad(s, pad_id, 1 << 20), pi = data::pad(ti, pad_id, 1 << 20), po = data::pad(to, pad_id, 1 << 20);
  return {ps.ids, ps.lengths, pi.ids, pi.lengths, po.ids, ps.batch, ps.length, pi.length};
}

std::vector<std::vector<std::int64_t>> epoch_batches(const std::vector<Seq2SeqExample>& ex, std::span<const std::int64_t> members, std::int64_t batch,
                                                     std::int64_t tokens, std::uint64_t seed, std::uint64_t epoch) {
  const auto perm = data::shuffled(std::int64_t(members.size()), seed, epoch);
  std::vector<std::vector<std::int64_t>> out;
  const std::int64_t n = std::int64_t(perm.size());
  const std::int64_t pool = tokens > 0 || batch > n / 50 ? n : 50 * batch;  // no overflow for any batch
  auto longest = [&](std::int64_t i) {
    const auto& e = ex[std::size_t(i)];
    return std::int64_t(std::max(e.src.size(), e.tgt.size() - 1));
  };
  for (std::int64_t p0 = 0; p0 < n; p0 += pool) {
    std::vector<std::int64_t> chunk;
    for (std::int64_t k = p0; k < std::min(p0 + pool, n); ++k) chunk.push_back(members[std::size_t(perm[std::size_t(k)])]);
    if (tokens <= 0) {  // by source length (less padding of the sources)
      std::stable_sort(chunk.begin(), chunk.end(), [&](auto x, auto y) { return ex[std::size_t(x)].src.size() < ex[std::size_t(y)].src.size(); });
      for (std::size_t b = 0; b < chunk.size(); b += std::size_t(batch))
        out.emplace_back(chunk.begin() + std::ptrdiff_t(b), chunk.begin() + std::ptrdiff_t(std::min(chunk.size(), b + std::size_t(batch))));
      continue;
    }
    std::stable_sort(chunk.begin(), chunk.end(), [&](auto x, auto y) { return longest(x) < longest(y); });
    std::vector<std::int64_t> cur;
    for (std::int64_t i : chunk) {  // sorted by length: the newest is the longest
      if (!cur.empty() && std::int64_t(cur.size() + 1) * longest(i) > tokens) out.push_back(std::move(cur)), cur.clear();
      cur.push_back(i);
    }
    if (!cur.empty()) out.push_back(std::move(cur));
  }
  const auto order = data::shuffled(std::int64_t(out.size()), seed ^ 0x9e3779b97f4a7c15ull, epoch);
  std::vector<std::vector<std::int64_t>> shuffled_out;
  for (auto i : order) shuffled_out.push_back(std::move(out[std::size_t(i)]));
  return shuffled_out;
}

}  // namespace ctgrad::data
