// T5 span corruption: the reference's counts, a noise rate that is the same at every position
// (where Google's layout always ends a sequence with noise), randomness at short lengths, exact
// noise counts, the mean span length, inputs/targets built as the paper shows, the length
// arithmetic, and determinism given (seed, step).
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include <ctgrad/data/span_corruption.hpp>
#include <ctgrad/base/random.hpp>

using namespace ctgrad;
using namespace ctgrad::data;

namespace {
// Spans (runs of noise) of a mask.
std::int64_t runs(const std::vector<std::uint8_t>& m) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < m.size(); ++i) n += m[i] && (i == 0 || !m[i - 1]);
  return n;
}
}  // namespace

TEST_CASE("Span corruption: the reference's noise and span counts (binary32, halves to even)", "[data][t5]") {
  const SpanCorruptionOptions o;
  // Values of t5.data.preprocessors.random_spans_noise_mask under TensorFlow.
  CHECK(span_counts(512, o).noise == 77);
  CHECK(span_counts(512, o).spans == 26);
  CHECK(span_counts(30, o).noise == 4);  // 4.5 in binary32 rounds to even
  CHECK(span_counts(30, o).spans == 1);
  CHECK(span_counts(31, o).noise == 5);
  CHECK(span_counts(31, o).spans == 2);
  CHECK(span_counts(2, o).noise == 1);   // at least one, at most length - 1
  CHECK(span_counts(10, {.noise_density = 0.99}).noise == 9);
  CHECK(span_counts(10, {.noise_density = 0.99}).spans == 1);  // leaves a kept token between spans
  CHECK_THROWS_WITH(span_counts(1, o), Catch::Contains("at least 2 tokens"));
  CHECK_THROWS_WITH(span_counts(10, {.noise_density = 1.5}), Catch::Contains("noise density"));
}

TEST_CASE("Span corruption: inputs and targets as the paper's example", "[data][t5]") {
  // The quick brown fox jumps over the lazy dog, noise on quick brown / the lazy.
  const std::vector<std::int32_t> tokens{10, 11, 12, 13, 14, 15, 16, 17, 18};
  const std::vector<std::uint8_t> mask{0, 1, 1, 0, 0, 0, 1, 1, 0};
  std::vector<std::int32_t> in, out;
  CHECK(corrupt_spans(tokens, mask, 99, 1, in, out) == 2);
  CHECK(in == std::vector<std::int32_t>{10, 99, 13, 14, 15, 98, 18, 1});
  CHECK(out == std::vector<std::int32_t>{99, 11, 12, 98, 16, 17, 1});
  // More spans than sentinels: the next ids would be ordinary tokens.
  std::vector<std::int32_t> many(300, 7);
  std::vector<std::uint8_t> alternate(300);
  for (std::size_t i = 0; i < alternate.size(); i += 2) alternate[i] = 1;
  CHECK_THROWS_WITH(corrupt_spans(many, alternate, 999, 1, in, out, 100), Catch::Contains("there are only 100 sentinels"));
  // A span at the start and one at the end.
  CHECK(corrupt_spans(tokens, std::vector<std::uint8_t>{1, 0, 0, 0, 0, 0, 0, 1, 1}, 99, 1, in, out) == 2);
  CHECK(in == std::vector<std::int32_t>{99, 11, 12, 13, 14, 15, 16, 98, 1});
  CHECK(out == std::vector<std::int32_t>{99, 10, 98, 17, 18, 1});
}

TEST_CASE("Span corruption: the noise rate is flat over positions at every length, the reference's is not", "[data][t5]") {
  constexpr int kDraws = 100000;
  for (const std::int64_t L : {8, 20, 30, 64, 114}) {
    const SpanCounts c = span_counts(L, {});
    std::vector<std::int64_t> hits(static_cast<std::size_t>(L)), ref_hits(static_cast<std::size_t>(L));
    std::int64_t spans = 0, noise = 0;
    std::set<std::vector<std::uint8_t>> distinct;
    for (int d = 0; d < kDraws; ++d) {
      const std::uint64_t key = random::key(5, std::uint64_t(L), std::uint64_t(d));
      const auto m = noise_mask(L, key, {});
      std::int64_t n = 0;
      for (std::int64_t i = 0; i < L; ++i) hits[std::size_t(i)] += m[std::size_t(i)], n += m[std::size_t(i)];
      REQUIRE(n == c.noise);  // exact, every draw
      const std::int64_t r = runs(m);
      REQUIRE((r == c.spans || r == c.spans + 1));  // + 1 when the cut falls inside a span
      spans += r, noise += n;
      if (distinct.size() < 1000) distinct.insert(m);
      const auto ref = noise_mask(L, key, {.reference_placement = true});
      for (std::int64_t i = 0; i < L; ++i) ref_hits[std::size_t(i)] += ref[std::size_t(i)];
    }
    const double p = double(c.noise) / double(L), se = std::sqrt(p * (1 - p) / kDraws);
    INFO("length " << L << ": noise " << c.noise << ", spans " << c.spans);
    for (std::int64_t i = 0; i < L; ++i) {
      INFO("position " << i);
      CHECK(std::abs(double(hits[std::size_t(i)]) / kDraws - p) <= 3 * se);
    }
    CHECK(distinct.size() > 5);  // random at every length
    // The span length: noise / (spans + P(cut inside a span)), P = (noise - spans) / length.
    const double expected = double(c.noise) / (double(c.spans) + double(c.noise - c.spans) / double(L));
    CHECK(double(noise) / double(spans) == Approx(expected).epsilon(0.01));
    // Google's layout: the last position is always noise.
    CHECK(ref_hits.back() == kDraws);
  }
}

TEST_CASE("Span corruption: lengths fit (the reference's random_spans_helper, one more span)", "[data][t5]") {
  for (const std::int64_t want : {8, 64, 128, 512}) {
    const SpanLengths l = span_corruption_lengths(want, {});
    INFO("inputs " << want << " -> tokens " << l.tokens << ", targets " << l.targets);
    CHECK(l.inputs <= want);
    if (want >= 64) CHECK(l.tokens > want);  // expanded: more raw tokens than input positions
    // The worst case over many masks of every length up to `tokens` fits both lengths.
    for (std::int64_t n = 2; n <= l.tokens; n += std::max<std::int64_t>(1, l.tokens / 16))
      for (std::uint64_t k = 0; k < 200; ++k) {
        std::vector<std::int32_t> tok(std::size_t(n), 7), in, out;
        corrupt_spans(tok, noise_mask(n, k, {}), 99, 1, in, out);
        REQUIRE(std::int64_t(in.size()) <= want);
        REQUIRE(std::int64_t(out.size()) <= l.targets);
      }
  }
  CHECK(span_corruption_lengths(512, {}).tokens == 567);
  CHECK(span_corruption_lengths(64, {.noise_density = 0.99999999}).tokens > 64);  // returns: binary32 rounds it to 1, nothing is kept  // the reference: 568 (and 114 targets); one less leaves room for the cut's span
  CHECK_THROWS_WITH(span_corruption_lengths(3, {}), Catch::Contains("no room"));
}

TEST_CASE("Span corruption batches: deterministic given (seed, step), new masks each step, padded", "[data][t5]") {
  std::vector<std::vector<std::int32_t>> seqs;
  for (int i = 0; i < 50; ++i) {
    std::vector<std::int32_t> s;
    for (int t = 0; t < 10 + i % 17; ++t) s.push_back(5 + (i * 31 + t) % 80);
    seqs.push_back(s);
  }
  const SpanCorruptionBatches::Ids ids{.pad = 0, .eos = 1, .first_sentinel = 199};
  SpanCorruptionBatches a(seqs, ids, {}, 8, 42), b(seqs, ids, {}, 8, 42);
  a.draw(7), b.draw(7);
  CHECK(std::vector<std::int32_t>(a.inputs().begin(), a.inputs().end()) == std::vector<std::int32_t>(b.inputs().begin(), b.inputs().end()));
  CHECK(std::vector<std::int32_t>(a.targets().begin(), a.targets().end()) == std::vector<std::int32_t>(b.targets().begin(), b.targets().end()));
  const std::vector<std::int32_t> first(a.inputs().begin(), a.inputs().end());
  a.draw(8);
  CHECK(std::vector<std::int32_t>(a.inputs().begin(), a.inputs().end()) != first);
  for (std::int64_t r = 0; r < a.batch(); ++r) {
    const std::int64_t T = a.target_length();
    const auto dec_in = a.decoder_inputs().subspan(std::size_t(r * T), std::size_t(T));
    const auto tgt = a.targets().subspan(std::size_t(r * T), std::size_t(T));
    const std::int32_t n = a.target_lengths()[std::size_t(r)];
    CHECK(dec_in[0] == ids.pad);  // T5's decoder start
    for (std::int32_t t = 1; t < n; ++t) CHECK(dec_in[std::size_t(t)] == tgt[std::size_t(t - 1)]);
    CHECK(tgt[std::size_t(n - 1)] == ids.eos);
    CHECK(tgt[0] == ids.first_sentinel);
    for (std::int64_t t = n; t < T; ++t) CHECK(tgt[std::size_t(t)] == ids.pad);
    const std::int32_t m = a.input_lengths()[std::size_t(r)];
    CHECK(a.inputs()[std::size_t(r * a.input_length() + m - 1)] == ids.eos);
  }
  // Validation masks belong to the sequence, not the batch it is in.
  a.rows(4, 4);
  const std::vector<std::int32_t> row5(a.inputs().begin() + a.input_length(), a.inputs().begin() + a.input_length() + a.input_lengths()[1]);
  a.rows(5, 1);
  CHECK(std::vector<std::int32_t>(a.inputs().begin(), a.inputs().begin() + a.input_lengths()[0]) == row5);
}
