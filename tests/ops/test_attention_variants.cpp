// Grouped-query, sliding-window and soft-capped attention, and rotary positions, against the same
// computation written another way: K/V repeated per query head, an explicit windowed mask, the
// capped scores from separate ops, and RoPE's rotation by its formula.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

namespace {
// n values in [-14 s, 14 s], a fixed pattern.
std::vector<double> pattern(std::size_t n, double s, int salt = 0) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = s * double(int((i + std::size_t(salt)) * 7919 % 29) - 14);
  return v;
}
template <class P, class Q>
void same_tensor(P& a, Q& b, const char* name, bool grad, double tol) {
  auto x = grad ? a.input_grad(name) : a.output(name);
  auto y = grad ? b.input_grad(name) : b.output(name);
  REQUIRE(x.numel == y.numel);
  double worst = 0;
  for (std::int64_t e = 0; e < x.numel; ++e) worst = std::max(worst, std::abs(double(x[e]) - double(y[e])));
  INFO(name << (grad ? " gradient" : "") << ": worst difference " << worst);
  CHECK(worst <= tol);
}
}  // namespace

// 4 query heads over KvHeads key/value heads, seq_first, causal; Repeat: K and V copied to every
// query head (concat), through ordinary multi-head attention.
template <int KvHeads, bool Repeat>
constexpr auto grouped = [] {
  Builder g;
  Value q = g.input("q", {Batch, Seq, 4, 8}, {.grad = true});
  Value k = g.input("k", {Batch, Seq, KvHeads, 8}, {.grad = true});
  Value v = g.input("v", {Batch, Seq, KvHeads, 6}, {.grad = true});
  Value b = g.input("b", {1, 4, Seq, Seq}, {.grad = true});
  const AttentionOptions o{.causal = true, .seq_first = true};
  Value y;
  if constexpr (Repeat) {
    auto repeat = [&](Value x, int d) {  // [B, T, KvHeads, d] -> [B, T, 4, d], head h from h / (4 / KvHeads)
      Value parts[4];
      for (int h = 0; h < 4; ++h) parts[h] = slice(x, 2, h / (4 / KvHeads), 1);
      return reshape(concat({parts[0], parts[1], parts[2], parts[3]}, 2), {Batch, Seq, 4, d});
    };
    y = attention(q, repeat(k, 8), repeat(v, 6), b, o);
  } else {
    y = attention(q, k, v, b, o);
  }
  g.output(y, "y");
  g.loss(sum(y * g.input("probe", {Batch, Seq, 4, 6})));
  return g;
};

template <int KvHeads>
void check_grouped() {
  static constexpr auto G = freeze<grouped<KvHeads, false>>();
  static constexpr auto R = freeze<grouped<KvHeads, true>>();
  Program<G, double> a;
  Program<R, double> b;
  // 70 positions: two blocks of queries.
  const std::int64_t B = 2, T = 70;
  auto run = [&](auto& p) {
    p.set_input("q", std::span<const double>(pattern(std::size_t(B * T * 32), 0.02)), {B, T, 4, 8});
    p.set_input("k", std::span<const double>(pattern(std::size_t(B * T * KvHeads * 8), 0.03, 5)), {B, T, KvHeads, 8});
    p.set_input("v", std::span<const double>(pattern(std::size_t(B * T * KvHeads * 6), 0.1, 11)), {B, T, KvHeads, 6});
    p.set_input("b", std::span<const double>(pattern(std::size_t(4 * T * T), 0.01, 3)), {1, 4, T, T});
    p.set_input("probe", std::span<const double>(pattern(std::size_t(B * T * 24), 0.05, 7)), {B, T, 4, 6});
    p.forward();
    p.backward();
  };
  run(a);
  run(b);
  same_tensor(a, b, "y", false, 1e-12);
  for (const char* in : {"q", "k", "v", "b"}) same_tensor(a, b, in, true, 1e-11);
}

TEST_CASE("grouped-query attention equals attention on K and V repeated per query head", "[ops][attention]") {
  SECTION("4 query heads over 2 (GQA)") { check_grouped<2>(); }
  SECTION("4 query heads over 1 (MQA)") { check_grouped<1>(); }
}

// A sliding window and a soft cap in the fused op, against an explicit windowed causal mask and
// the capped scores from separate ops (attention_weights).
template <bool Fused>
constexpr auto windowed = [] {
  Builder g;
  Value q = g.input("q", {Batch, 2, Seq, 4}, {.grad = true});
  Value k = g.input("k", {Batch, 2, SeqKV, 4}, {.grad = true});
  Value v = g.input("v", {Batch, 2, SeqKV, 3}, {.grad = true});
  Value b = g.input("b", {1, 2, Seq, SeqKV}, {.grad = true});
  const AttentionOptions o{.scale = 1.5, .causal = true, .window = 5, .softcap = 2.0};
  Value y = Fused ? attention(q, k, v, b, o) : matmul(attention_weights(q, k, std::nullopt, b, o), v);
  g.output(y, "y");
  g.loss(sum(y * g.input("probe", {Batch, 2, Seq, 3})));
  return g;
};

TEST_CASE("windowed, soft-capped attention equals its mask and capped scores from separate ops", "[ops][attention]") {
  static constexpr auto F = freeze<windowed<true>>();
  static constexpr auto U = freeze<windowed<false>>();
  Program<F, double> a;
  Program<U, double> b;
  // 90 queries over 100 keys (10 cached): two query blocks; each sees 5 keys.
  const std::int64_t B = 2, Tq = 90, Tk = 100;
  auto run = [&](auto& p) {
    p.set_input("q", std::span<const double>(pattern(std::size_t(B * 2 * Tq * 4), 0.1)), {B, 2, Tq, 4});
    p.set_input("k", std::span<const double>(pattern(std::size_t(B * 2 * Tk * 4), 0.1, 5)), {B, 2, Tk, 4});
    p.set_input("v", std::span<const double>(pattern(std::size_t(B * 2 * Tk * 3), 0.1, 11)), {B, 2, Tk, 3});
    p.set_input("b", std::span<const double>(pattern(std::size_t(2 * Tq * Tk), 0.05, 3)), {1, 2, Tq, Tk});
    p.set_input("probe", std::span<const double>(pattern(std::size_t(B * 2 * Tq * 3), 0.05, 7)), {B, 2, Tq, 3});
    p.forward();
    p.backward();
  };
  run(a);
  run(b);
  same_tensor(a, b, "y", false, 1e-12);
  for (const char* in : {"q", "k", "v", "b"}) same_tensor(a, b, in, true, 1e-11);
}

constexpr Msg non_dividing_heads = [] {
  Builder g;
  attention(g.input("q", {Batch, Seq, 4, 8}), g.input("k", {Batch, Seq, 3, 8}), g.input("v", {Batch, Seq, 3, 8}), {.seq_first = true});
  return g.error;
}();
constexpr Msg window_without_causal = [] {
  Builder g;
  Value q = g.input("q", {Batch, 2, Seq, 8});
  attention(q, q, q, {.window = 4});
  return g.error;
}();
TEST_CASE("attention refuses key/value heads that do not divide the query heads, and a window without causal", "[ops][attention][errors]") {
  CHECK_THAT(std::string(non_dividing_heads.view()), Catch::Matchers::Contains("key/value heads (3) must divide query heads (4)"));
  CHECK_THAT(std::string(window_without_causal.view()), Catch::Matchers::Contains("window needs causal"));
}

// RoPE against its formula, both conventions, with positions past the table's first size.
constexpr auto rotary = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 2, 8});
  Value p = g.input("p", {Seq}, {.dtype = DType::index});
  g.output(rope(x, p, {.theta = 10000, .fraction = 0.75}), "half");
  g.output(rope(x, p, {.theta = 10000, .fraction = 0.75, .interleaved = true}), "interleaved");
  return g;
};
static constexpr auto ROTARY = freeze<rotary>();

TEST_CASE("rope rotates each pair by position x theta^(-2i/rot), Llama's and GPT-J's pairing", "[ops][rope]") {
  Program<ROTARY, double> prog;
  const std::int64_t B = 1, T = 3, H = 2, d = 8, rot = 6;
  const std::vector<std::int32_t> pos{0, 7, 5000};
  const auto x = pattern(std::size_t(B * T * H * d), 0.1);
  prog.set_input("x", std::span<const double>(x), {B, T, H, d});
  prog.set_input("p", std::span<const std::int32_t>(pos), {T});
  prog.forward();
  for (const bool interleaved : {false, true}) {
    auto y = prog.output(interleaved ? "interleaved" : "half");
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < H; ++h) {
        const double* xr = x.data() + (t * H + h) * d;
        const std::int64_t row = (t * H + h) * d;
        for (std::int64_t i = 0; i < rot / 2; ++i) {
          const std::int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + rot / 2;
          const double angle = pos[std::size_t(t)] * std::pow(10000.0, -2.0 * double(i) / double(rot));
          CHECK(y[row + a] == Approx(xr[a] * std::cos(angle) - xr[b] * std::sin(angle)).margin(1e-12));
          CHECK(y[row + b] == Approx(xr[b] * std::cos(angle) + xr[a] * std::sin(angle)).margin(1e-12));
        }
        for (std::int64_t j = rot; j < d; ++j) CHECK(y[row + j] == xr[j]);  // past the rotated fraction: unchanged
      }
  }
  const std::vector<std::int32_t> bad{0, -1, 2};
  prog.set_input("p", std::span<const std::int32_t>(bad), {T});
  CHECK_THROWS_WITH(prog.forward(), Catch::Matchers::Contains("op rope: position -1 of token 1 is outside [0, 16777216)"));
}
