// Fused attention against the same computation from separate ops, its masks, and its memory.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

// The same masked attention twice: fused, and from matmul/masked_fill/softmax/matmul.
constexpr auto both = [] {
  Builder g;
  Value q = g.input("q", {Batch, 2, Seq, 8}, {.grad = true});
  Value k = g.input("k", {Batch, 2, SeqKV, 8}, {.grad = true});
  Value v = g.input("v", {Batch, 2, SeqKV, 5}, {.grad = true});
  Value m = g.input("m", {Batch, 1, 1, SeqKV});
  Value probe = g.input("probe", {Batch, 2, Seq, 5});
  Value fused = attention(q, k, v, m);
  Value unfused = matmul(attention_weights(q, k, m, 1 / std::sqrt(8.0)), v);
  g.output(fused, "fused");
  g.output(unfused, "unfused");
  g.loss(sum(fused * probe) + scale(sum(unfused * probe), 0.0));
  return g;
};
static constexpr auto BOTH = freeze<both>();

constexpr auto fused_only = [] {
  Builder g;
  Value q = g.input("q", {Batch, 2, Seq, 8}, {.grad = true});
  Value k = g.input("k", {Batch, 2, SeqKV, 8}, {.grad = true});
  Value v = g.input("v", {Batch, 2, SeqKV, 5}, {.grad = true});
  Value m = g.input("m", {Batch, 1, 1, SeqKV});
  g.loss(sum(attention(q, k, v, m) * g.input("probe", {Batch, 2, Seq, 5})));
  return g;
};
constexpr auto unfused_only = [] {
  Builder g;
  Value q = g.input("q", {Batch, 2, Seq, 8}, {.grad = true});
  Value k = g.input("k", {Batch, 2, SeqKV, 8}, {.grad = true});
  Value v = g.input("v", {Batch, 2, SeqKV, 5}, {.grad = true});
  Value m = g.input("m", {Batch, 1, 1, SeqKV});
  g.loss(sum(matmul(attention_weights(q, k, m, 1 / std::sqrt(8.0)), v) * g.input("probe", {Batch, 2, Seq, 5})));
  return g;
};
static constexpr auto FUSED = freeze<fused_only>();
static constexpr auto UNFUSED = freeze<unfused_only>();

namespace {
template <class P>
void set_inputs(P& p, std::vector<double> mask, std::int64_t queries = 70, std::int64_t keys = 90) {
  fill_random_inputs(p, {.seed = 4, .sym = {2, queries, keys, 1, 1, 1}});  // 70 queries: more than one block of 64
  p.set_input("m", std::span<const double>(mask), {2, 1, 1, keys});
}
std::vector<double> mask_with_lengths(int a, int b, int keys = 90) {
  std::vector<double> m(std::size_t(2 * keys), 0.0);
  for (int j = 0; j < a; ++j) m[std::size_t(j)] = 1;
  for (int j = 0; j < b; ++j) m[std::size_t(keys + j)] = 1;
  return m;
}
}  // namespace

TEST_CASE("fused attention equals attention from separate ops, with its gradients", "[ops][attention]") {
  // 90 keys: blocks of 64 queries; 20,000 keys: more scores than a block keeps on its stack, so
  // one query per block and a heap work space.
  const int keys = GENERATE(90, 20000), queries = keys > 1000 ? 3 : 70;
  CAPTURE(keys);
  Program<FUSED, double> f;
  Program<UNFUSED, double> u;
  set_inputs(f, mask_with_lengths(keys, keys * 2 / 5, keys), queries, keys);
  set_inputs(u, mask_with_lengths(keys, keys * 2 / 5, keys), queries, keys);
  f.forward();
  f.backward();
  u.forward();
  u.backward();
  CHECK(f.loss() == Approx(u.loss()).epsilon(1e-12));
  for (const char* name : {"q", "k", "v"}) {
    auto gf = f.input_grad(name), gu = u.input_grad(name);
    REQUIRE(gf.numel == gu.numel);
    double worst = 0;
    for (std::int64_t e = 0; e < gf.numel; ++e) worst = std::max(worst, std::abs(gf[e] - gu[e]));
    INFO(name);
    CHECK(worst < 1e-10);
  }
}

TEST_CASE("a fully masked attention row gives zeros and no NaN", "[ops][attention][numerics]") {
  Program<BOTH> p;
  fill_random_inputs(p, {.seed = 5, .sym = {2, 6, 9, 1, 1, 1}});
  std::vector<float> mask(18, 1.0f);
  for (int j = 9; j < 18; ++j) mask[std::size_t(j)] = 0;  // sequence 1: every key masked
  p.set_input("m", std::span<const float>(mask), {2, 1, 1, 9});
  p.forward();
  p.backward();
  auto out = p.output("fused");
  const std::int64_t half = out.numel / 2;
  for (std::int64_t e = 0; e < out.numel; ++e) {
    REQUIRE(std::isfinite(out[e]));
    if (e >= half) REQUIRE(out[e] == 0.0f);
  }
  for (const char* name : {"q", "k", "v"}) {
    auto gr = p.input_grad(name);
    for (std::int64_t e = 0; e < gr.numel; ++e) REQUIRE(std::isfinite(gr[e]));
    for (std::int64_t e = gr.numel / 2; e < gr.numel; ++e) REQUIRE(gr[e] == 0.0f);  // no gradient
  }
}

TEST_CASE("fused attention keeps no Tq x Tk buffer", "[ops][attention][plan]") {
  using P = Program<FUSED>;
  // Every buffer of the fused graph is linear in each of Seq and SeqKV; the unfused graph has
  // Batch*Seq*SeqKV score buffers.
  auto quadratic = [](const auto& plan) {
    for (int b = 0; b < plan.n_buffers; ++b) {
      const Dim& e = plan.buffers[std::size_t(b)].elems;
      if (e.exp[1] >= 1 && e.exp[2] >= 1) return true;
    }
    return false;
  };
  CHECK_FALSE(quadratic(P::train_plan));
  CHECK(quadratic(Program<UNFUSED>::train_plan));
}
