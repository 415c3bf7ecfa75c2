// Masked-language-model data: the paper's rates on 10^5 selected tokens, specials never selected
// or drawn, whole-word selection, determinism (resume) and dynamic masks, packing and padding.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include <ctgrad/data/mlm.hpp>
#include <ctgrad/base/random.hpp>

using namespace ctgrad;
using namespace ctgrad::data;

namespace {
const MlmSpecials kSpecials{.vocab = 1000};

std::vector<std::vector<std::int32_t>> random_sequences(std::size_t n, std::size_t len, std::uint64_t seed) {
  std::vector<std::vector<std::int32_t>> s(n, std::vector<std::int32_t>(len));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t t = 0; t < len; ++t)
      s[i][t] = kSpecials.first_regular + std::int32_t(random::bits(random::key(seed, i, 7), t) % std::uint64_t(kSpecials.vocab - kSpecials.first_regular));
  return s;
}
}  // namespace

TEST_CASE("MLM masking: 15% selected, then 80% [MASK], 10% random, 10% unchanged, over 10^5 tokens", "[data][mlm]") {
  const auto seqs = random_sequences(200, 100, 1);
  MlmBatches batches(seqs, kSpecials, {}, 50, 3);
  std::int64_t selected = 0, candidates = 0, masked = 0, replaced = 0, kept = 0;
  for (std::uint64_t n = 1; selected < 100000; ++n) {
    batches.draw(n);
    const auto ids = batches.ids();
    candidates += 100 * batches.batch();
    std::set<std::int32_t> picked;
    for (std::size_t k = 0; k < batches.picks().size(); ++k) {
      const std::int32_t at = batches.picks()[k], now = ids[std::size_t(at)], was = batches.targets()[k];
      REQUIRE(picked.insert(at).second);                   // each position once
      REQUIRE(was >= kSpecials.first_regular);             // specials are never selected
      REQUIRE((now == kSpecials.mask || now >= kSpecials.first_regular));  // nor drawn as a random token
      masked += now == kSpecials.mask, replaced += now != kSpecials.mask && now != was, kept += now == was;
      ++selected;
    }
    // [CLS], [SEP] and padding are never picked, and every row has exactly round(0.15 * 100) picks.
    for (std::int64_t b = 0; b < batches.batch(); ++b) {
      CHECK(ids[std::size_t(b * batches.seq())] == kSpecials.cls);
      CHECK(ids[std::size_t(b * batches.seq() + 101)] == kSpecials.sep);
    }
    CHECK(batches.picks().size() == std::size_t(15 * batches.batch()));
  }
  const double n = double(selected);
  auto within = [&](double count, double p) {  // 3 standard errors of a binomial proportion
    const double se = std::sqrt(p * (1 - p) / n);
    INFO("rate " << count / n << " expected " << p << " +- " << 3 * se);
    CHECK(std::abs(count / n - p) <= 3 * se);
  };
  CHECK(double(selected) / double(candidates) == Approx(0.15));
  const double same = 1.0 / double(kSpecials.vocab - kSpecials.first_regular);  // a random token may be the original
  within(double(masked), 0.8);
  within(double(replaced), 0.1 * (1 - same));
  within(double(kept), 0.1 + 0.1 * same);
}

TEST_CASE("MLM masking: a function of (seed, batch number): the same on resume, new for each batch", "[data][mlm]") {
  const auto seqs = random_sequences(64, 30, 2);
  MlmBatches a(seqs, kSpecials, {}, 8, 11), b(seqs, kSpecials, {}, 8, 11);
  a.draw(5), b.draw(9), b.draw(5);
  CHECK(std::equal(a.ids().begin(), a.ids().end(), b.ids().begin(), b.ids().end()));
  CHECK(std::equal(a.picks().begin(), a.picks().end(), b.picks().begin(), b.picks().end()));
  const std::vector<std::int32_t> first(a.ids().begin(), a.ids().end());
  a.draw(6);
  CHECK(!std::equal(first.begin(), first.end(), a.ids().begin(), a.ids().end()));
  // Validation rows: fixed rows and fixed masks, whatever was drawn before.
  a.rows(8, 4);
  const std::vector<std::int32_t> v(a.ids().begin(), a.ids().end());
  b.draw(100), b.rows(8, 4);
  CHECK(std::equal(v.begin(), v.end(), b.ids().begin(), b.ids().end()));
}

TEST_CASE("MLM masking: whole-word selection takes every piece of a word", "[data][mlm]") {
  // Even ids start a word, odd ids continue one.
  std::vector<std::uint8_t> starts(std::size_t(kSpecials.vocab));
  for (std::size_t i = 0; i < starts.size(); ++i) starts[i] = i % 2 == 0;
  const auto seqs = random_sequences(100, 60, 4);
  MlmBatches batches(seqs, kSpecials, {.whole_word = true}, 20, 5, starts);
  for (std::uint64_t n = 1; n <= 20; ++n) {
    batches.draw(n);
    std::set<std::int32_t> picked(batches.picks().begin(), batches.picks().end());
    std::vector<std::int32_t> original(batches.ids().begin(), batches.ids().end());
    for (std::size_t k = 0; k < batches.picks().size(); ++k) original[std::size_t(batches.picks()[k])] = batches.targets()[k];
    for (std::int32_t at : picked) {
      // The word's previous piece (when this one continues a word) and next piece (when it continues) are picked too.
      const std::int32_t tok = original[std::size_t(at)];
      if (tok % 2 == 1 && original[std::size_t(at - 1)] >= kSpecials.first_regular) CHECK(picked.count(at - 1));
      const std::int32_t next = original[std::size_t(at + 1)];
      if (next >= kSpecials.first_regular && next % 2 == 1) CHECK(picked.count(at + 1));
    }
    CHECK(batches.picks().size() <= std::size_t(9 * batches.batch()));  // round(0.15 * 60) per row at most
  }
}

TEST_CASE("MLM data: units packed whole in order, rows padded to the longest of the batch", "[data][mlm]") {
  const std::vector<std::vector<std::int32_t>> units{{5, 6, 7}, {8, 9}, {10, 11, 12, 13}, {14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}, {25}};
  const auto packed = pack_units(units, 6);
  REQUIRE(packed.size() == 4);
  CHECK(packed[0] == std::vector<std::int32_t>{5, 6, 7, 8, 9});
  CHECK(packed[1] == std::vector<std::int32_t>{10, 11, 12, 13});
  CHECK(packed[2] == std::vector<std::int32_t>{14, 15, 16, 17, 18, 19});  // a unit longer than 6: cut
  CHECK(packed[3] == std::vector<std::int32_t>{20, 21, 22, 23, 24, 25});  // the rest, then the next unit
  MlmBatches b(packed, kSpecials, {}, 2, 1);
  b.rows(0, 2);
  CHECK(b.seq() == 7);
  CHECK(b.lengths()[0] == 7);
  CHECK(b.lengths()[1] == 6);
  CHECK(b.ids()[13] == kSpecials.pad);
  CHECK_THROWS_WITH(b.rows(3, 2), Catch::Matchers::Contains("rows 3 + 2 of 4"));
}

TEST_CASE("MLM data: next-sentence pairs are half true continuations, never across documents, with segments", "[data][mlm]") {
  // 40 sequences of distinct lengths, so each row's A and B can be recognised by their lengths;
  // documents end after sequences 9 and 29 (and at the end).
  std::vector<std::vector<std::int32_t>> seqs;
  std::vector<std::uint8_t> has_next;
  for (std::size_t i = 0; i < 40; ++i) {
    seqs.push_back(std::vector<std::int32_t>(i + 1, kSpecials.first_regular + std::int32_t(i)));
    has_next.push_back(i != 9 && i != 29 && i != 39);
  }
  MlmBatches batches(seqs, kSpecials, {}, 64, 5);
  batches.next_sentence(has_next);
  std::int64_t rows = 0, next = 0, could = 0;
  for (std::uint64_t n = 1; n <= 300; ++n) {
    batches.draw(n);
    const auto ids = batches.ids(), seg = batches.segments();
    for (std::int64_t b = 0; b < batches.batch(); ++b) {
      const std::int32_t* row = ids.data() + b * batches.seq();
      const std::int32_t* s = seg.data() + b * batches.seq();
      const std::int32_t len = batches.lengths()[std::size_t(b)];
      REQUIRE(row[0] == kSpecials.cls);
      std::int32_t sep = 1;
      while (row[sep] != kSpecials.sep) ++sep;
      const std::size_t a = std::size_t(sep - 2), second = std::size_t(len - sep - 3);  // sequence i has i + 1 tokens
      REQUIRE(row[len - 1] == kSpecials.sep);
      for (std::int32_t t = 0; t < len; ++t) REQUIRE(s[t] == (t > sep ? 1 : 0));
      const int label = batches.next_labels()[std::size_t(b)];
      if (label == 1) REQUIRE((second == a + 1 && has_next[a]));
      else REQUIRE(!(second == a + 1 && has_next[a]));
      REQUIRE(second != a);
      ++rows, next += label, could += has_next[a];
    }
  }
  // Of the rows whose A has a continuation, half get it (3 standard errors).
  const double p = double(next) / double(could), se = std::sqrt(0.25 / double(could));
  INFO("rows " << rows << ", A with a next " << could << ", labelled next " << next);
  CHECK(std::abs(p - 0.5) < 3 * se);
  // Validation pairs are fixed.
  batches.rows(0, 10);
  const std::vector<std::int32_t> first(batches.next_labels().begin(), batches.next_labels().end());
  batches.draw(7);
  batches.rows(0, 10);
  CHECK(std::equal(first.begin(), first.end(), batches.next_labels().begin()));
}
