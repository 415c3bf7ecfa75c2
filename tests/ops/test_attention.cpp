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
  Value m = g.input("m", {Batch, 1, 1, SeqKV}, {.dtype = DType::index});
  Value probe = g.input("probe", {Batch, 2, Seq, 5});
  Value fused = attention(q, k, v, m);
  Value unfused = matmul(attention_weights(q, k, m, std::nullopt, {.scale = 1 / std::sqrt(8.0)}), v);
  g.output(fused, "fused");
  g.output(unfused, "unfused");
  g.loss(sum(fused * probe) + scale(sum(unfused * probe), 0.0));
  return g;
};
static constexpr auto BOTH = freeze<both>();

// D: the head size of q and k (v's is 5). The mask "m" broadcasts over heads: [B, 1, 1, Tk] for
// padding, [B, 1, Tq, Tk] when it also carries the causal pattern (the unfused reference of a
// causal fused attention).
template <int D, bool Causal = false>
constexpr auto fused_only = [] {
  Builder g;
  Value q = g.input("q", {Batch, 2, Seq, D}, {.grad = true});
  Value k = g.input("k", {Batch, 2, SeqKV, D}, {.grad = true});
  Value v = g.input("v", {Batch, 2, SeqKV, 5}, {.grad = true});
  Value m = g.input("m", {Batch, 1, 1, SeqKV}, {.dtype = DType::index});
  g.loss(sum(attention(q, k, v, m, {.causal = Causal}) * g.input("probe", {Batch, 2, Seq, 5})));
  return g;
};
template <int D, bool Causal = false>
constexpr auto unfused_only = [] {
  Builder g;
  Value q = g.input("q", {Batch, 2, Seq, D}, {.grad = true});
  Value k = g.input("k", {Batch, 2, SeqKV, D}, {.grad = true});
  Value v = g.input("v", {Batch, 2, SeqKV, 5}, {.grad = true});
  Value m = Causal ? g.input("m", {Batch, 1, Seq, SeqKV}, {.dtype = DType::index}) : g.input("m", {Batch, 1, 1, SeqKV}, {.dtype = DType::index});
  g.loss(sum(matmul(attention_weights(q, k, m, std::nullopt, {.scale = 1 / std::sqrt(double(D))}), v) * g.input("probe", {Batch, 2, Seq, 5})));
  return g;
};
template <int D, bool Causal = false>
struct Pair {
  static constexpr auto fused = freeze<fused_only<D, Causal>>();
  static constexpr auto unfused = freeze<unfused_only<D, Causal>>();
};
static constexpr auto FUSED = Pair<8>::fused;
static constexpr auto UNFUSED = Pair<8>::unfused;

namespace {
// Key lengths a (sequence 0) and b (sequence 1); causal: also key j <= query i + (keys - queries).
std::vector<std::int32_t> mask_of(int a, int b, int keys, int queries = 1, bool causal = false) {
  std::vector<std::int32_t> m(std::size_t(2 * queries * keys), 0);
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < queries; ++i)
      for (int j = 0; j < (s == 0 ? a : b); ++j)
        if (!causal || j <= i + (keys - queries)) m[std::size_t((s * queries + i) * keys + j)] = 1;
  return m;
}

// The fused op against the reference from separate ops: loss and the gradients of q, k, v.
template <class T, int D, bool Causal = false>
void check_fused_equals_unfused(int queries, int keys, int len_b, double tol) {
  Program<Pair<D, Causal>::fused, T> f;
  Program<Pair<D, Causal>::unfused, T> u;
  fill_random_inputs(f, {.seed = 4, .sym = {2, queries, keys, 1, 1, 1}});
  fill_random_inputs(u, {.seed = 4, .sym = {2, queries, keys, 1, 1, 1}});
  const auto pad = mask_of(keys, len_b, keys), full = mask_of(keys, len_b, keys, queries, Causal);
  f.set_input("m", std::span<const std::int32_t>(pad), {2, 1, 1, keys});
  if (Causal) u.set_input("m", std::span<const std::int32_t>(full), {2, 1, queries, keys});
  else u.set_input("m", std::span<const std::int32_t>(pad), {2, 1, 1, keys});
  f.forward();
  f.backward();
  u.forward();
  u.backward();
  CHECK(f.loss() == Approx(u.loss()).epsilon(tol));
  for (const char* name : {"q", "k", "v"}) {
    auto gf = f.input_grad(name), gu = u.input_grad(name);
    REQUIRE(gf.numel == gu.numel);
    double worst = 0, largest = 0;
    for (std::int64_t e = 0; e < gf.numel; ++e)
      worst = std::max(worst, double(std::abs(gf[e] - gu[e]))), largest = std::max(largest, double(std::abs(gu[e])));
    INFO(name << ": worst difference " << worst << ", largest gradient " << largest);
    CHECK(worst <= tol * std::max(1.0, largest));
  }
}
}  // namespace

TEST_CASE("fused attention equals attention from separate ops, with its gradients", "[ops][attention]") {
  // 70 queries x 90 keys: two blocks of queries; padding leaves sequence 1 36 keys.
  SECTION("padding, double") { check_fused_equals_unfused<double, 8>(70, 90, 36, 1e-10); }
  SECTION("padding, float") { check_fused_equals_unfused<float, 8>(70, 90, 36, 2e-5); }
  // Causal with more keys than queries (a cache of 20 earlier positions) and padding.
  SECTION("causal, Tk > Tq, double") { check_fused_equals_unfused<double, 8, true>(70, 90, 61, 1e-10); }
  SECTION("causal, Tk > Tq, float") { check_fused_equals_unfused<float, 8, true>(70, 90, 61, 2e-5); }
  // 20,000 keys of head size 64: more scores than a block keeps on its stack (one query per block,
  // a heap work space), and GEMMs large enough to split across threads inside a task.
  SECTION("20,000 keys, head size 64") { check_fused_equals_unfused<double, 64>(3, 20000, 8000, 1e-10); }
  // Causal, head size 64, 200 positions: a head's first blocks read K^T and V^T copies, the later
  // ones (past kTransposedMax, 32 KB) the transposed products: float, blocks of 64 queries, copies
  // for 64 and 128 keys, not 192 and 200; double, blocks of 40, copies for 40 keys only.
  SECTION("causal, K^T copies for the first blocks only, double") { check_fused_equals_unfused<double, 64, true>(200, 200, 150, 1e-10); }
  SECTION("causal, K^T copies for the first blocks only, float") { check_fused_equals_unfused<float, 64, true>(200, 200, 150, 2e-5); }
}

TEST_CASE("a fully masked attention row gives zeros and no NaN", "[ops][attention][numerics]") {
  Program<BOTH> p;
  fill_random_inputs(p, {.seed = 5, .sym = {2, 6, 9, 1, 1, 1}});
  std::vector<std::int32_t> mask(18, 1);
  for (int j = 9; j < 18; ++j) mask[std::size_t(j)] = 0;  // sequence 1: every key masked
  p.set_input("m", std::span<const std::int32_t>(mask), {2, 1, 1, 9});
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

// T5's relative position bias on the fused kernel: [1, heads, Tq, Tk], shared by the batch, with a
// padding mask beside it, against the same scores built from separate ops; the bias's gradient
// (summed over the batch) too.
struct BiasedInputs {
  Value q, k, v, m, bias, probe;
};
constexpr BiasedInputs biased_inputs(Builder& g) {
  return {g.input("q", {Batch, 2, Seq, 4}, {.grad = true}),      g.input("k", {Batch, 2, SeqKV, 4}, {.grad = true}),
          g.input("v", {Batch, 2, SeqKV, 3}, {.grad = true}),     g.input("m", {Batch, 1, 1, SeqKV}, {.dtype = DType::index}),
          g.input("bias", {1, 2, Seq, SeqKV}, {.grad = true}), g.input("probe", {Batch, 2, Seq, 3})};
}
constexpr auto biased = [] {  // the loss through explicit scores; the fused output beside it
  Builder g;
  const auto [q, k, v, m, bias, probe] = biased_inputs(g);
  Value fused = attention(q, k, v, m, bias, {.scale = 1.0});
  Value unfused = matmul(attention_weights(q, k, m, bias, {.scale = 1.0}), v);
  g.output(fused, "fused");
  g.output(unfused, "unfused");
  g.output(sum(fused * probe), "fused_loss");
  g.loss(sum(unfused * probe));
  return g;
};
static constexpr auto BIASED = freeze<biased>();
constexpr auto biased_fused = [] {  // the loss through the fused kernel
  Builder g;
  const auto [q, k, v, m, bias, probe] = biased_inputs(g);
  g.loss(sum(attention(q, k, v, m, bias, {.scale = 1.0}) * probe));
  return g;
};
static constexpr auto BIASED_FUSED = freeze<biased_fused>();

TEST_CASE("an additive bias on the fused kernel equals adding it to explicit scores", "[ops][attention]") {
  Program<BIASED, double> u;
  Program<BIASED_FUSED, double> f;
  const RandomInputs in{.seed = 9, .sym = {3, 5, 7, 1, 1, 1}, .index_range = 2};
  fill_random_inputs(u, in);
  fill_random_inputs(f, in);
  const auto mask = mask_of(7, 4, 7);
  std::vector<std::int32_t> mask3(mask.begin(), mask.end());
  mask3.insert(mask3.end(), mask.begin(), mask.begin() + 7);  // three sequences: 7, 4, 7 keys
  u.set_input("m", std::span<const std::int32_t>(mask3), {3, 1, 1, 7});
  f.set_input("m", std::span<const std::int32_t>(mask3), {3, 1, 1, 7});
  u.forward();
  u.backward();
  f.forward();
  f.backward();
  const auto a = u.output("fused"), b = u.output("unfused");
  for (std::int64_t e = 0; e < a.numel; ++e) CHECK(a[e] == Approx(b[e]).epsilon(1e-12));
  CHECK(f.loss() == Approx(double(u.output("fused_loss")[0])).epsilon(1e-12));
  for (const char* name : {"q", "k", "v", "bias"}) {
    auto gf = f.input_grad(name), gu = u.input_grad(name);
    REQUIRE(gf.numel == gu.numel);
    for (std::int64_t e = 0; e < gf.numel; ++e) CHECK(gf[e] == Approx(gu[e]).margin(1e-12));
  }
}

namespace {
// n values in [-14 s, 14 s], a fixed pattern.
std::vector<float> fill(std::size_t n, float s) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = s * float(int(i * 7919 % 29) - 14);
  return v;
}
// The same values within float rounding.
void same(TensorView<float> x, TensorView<float> y) {
  REQUIRE(x.numel == y.numel);
  for (std::int64_t i = 0; i < x.numel; ++i) REQUIRE(x.data[i] == Approx(y.data[i]).epsilon(1e-5).margin(1e-6));
}
}  // namespace

// seq_first: the same attention on [B, T, H, d] as on [B, H, T, d] through transposes.
template <bool SeqFirst>
constexpr auto layout_graph = [] {
  Builder g;
  Value q = g.input("q", {Batch, Seq, 3, 4}, {.grad = true});
  Value k = g.input("k", {Batch, SeqKV, 3, 4}, {.grad = true});
  Value v = g.input("v", {Batch, SeqKV, 3, 5}, {.grad = true});
  Value m = g.input("m", {Batch, 1, 1, SeqKV}, {.dtype = DType::index});
  Value y = SeqFirst ? attention(q, k, v, m, {.causal = true, .seq_first = true})
                     : transpose(attention(transpose(q, 1, 2), transpose(k, 1, 2), transpose(v, 1, 2), m, {.causal = true}), 1, 2);
  g.output(y, "y");
  g.loss(sum(y * g.input("probe", {Batch, Seq, 3, 5})));
  return g;
};
static constexpr auto SEQ_FIRST = freeze<layout_graph<true>>();
static constexpr auto HEADS_OUTER = freeze<layout_graph<false>>();

TEST_CASE("seq_first attention equals attention on transposed heads, values and gradients", "[ops][attention]") {
  Program<SEQ_FIRST> a;
  Program<HEADS_OUTER> b;
  const std::int64_t B = 2, Tq = 7, Tk = 9;
  const auto q = fill(std::size_t(B * Tq * 12), 0.05f), k = fill(std::size_t(B * Tk * 12), 0.07f), v = fill(std::size_t(B * Tk * 15), 0.1f),
             probe = fill(std::size_t(B * Tq * 15), 0.03f);
  const std::vector<std::int32_t> m{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};  // sequence 1 pads its last 5 keys
  auto run = [&](auto& p) {
    p.set_input("q", std::span<const float>(q), {B, Tq, 3, 4});
    p.set_input("k", std::span<const float>(k), {B, Tk, 3, 4});
    p.set_input("v", std::span<const float>(v), {B, Tk, 3, 5});
    p.set_input("m", std::span<const std::int32_t>(m), {B, 1, 1, Tk});
    p.set_input("probe", std::span<const float>(probe), {B, Tq, 3, 5});
    p.forward();
    p.backward();
  };
  run(a);
  run(b);
  same(a.output("y"), b.output("y"));
  for (const char* in : {"q", "k", "v"}) same(a.input_grad(in), b.input_grad(in));
}

// packed_qkv: q, k, v read in place from one [B, T, 3, H, d] tensor, against the three slots
// copied out (split) and given to seq_first attention.
template <bool Packed>
constexpr auto packed_graph = [] {
  Builder g;
  Value qkv = g.input("qkv", {Batch, Seq, 3, 2, 4}, {.grad = true});
  Value m = g.input("m", {Batch, 1, 1, Seq}, {.dtype = DType::index});
  Value b = g.input("b", {1, 2, Seq, Seq}, {.grad = true});
  const AttentionOptions o{.causal = true, .seq_first = true};  // no dropout: its masks are keyed by the node, which differs
  Value y;
  if constexpr (Packed) {
    y = attention_packed(qkv, m, b, o);
  } else {
    auto parts = split<3>(qkv, 2);
    auto heads = [&](Value x) { return reshape(x, {Batch, Seq, 2, 4}); };
    y = attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), m, b, o);
  }
  g.output(y, "y");
  g.loss(sum(y * g.input("probe", {Batch, Seq, 2, 4})));
  return g;
};
static constexpr auto PACKED = freeze<packed_graph<true>>();
static constexpr auto UNPACKED = freeze<packed_graph<false>>();

TEST_CASE("packed_qkv attention equals attention on q, k, v copied out, values and gradients", "[ops][attention]") {
  Program<PACKED> a(Options{.seed = 5, .poison_assigned_gradients = true});
  Program<UNPACKED> b(Options{.seed = 5});
  const std::int64_t B = 2, T = 9;
  const auto qkv = fill(std::size_t(B * T * 24), 0.06f), bias = fill(std::size_t(2 * T * T), 0.02f), probe = fill(std::size_t(B * T * 8), 0.03f);
  std::vector<std::int32_t> m(std::size_t(B * T), 1);
  for (std::int64_t j = 6; j < T; ++j) m[std::size_t(T + j)] = 0;  // sequence 1 pads its last 3 keys
  auto run = [&](auto& p) {
    p.set_input("qkv", std::span<const float>(qkv), {B, T, 3, 2, 4});
    p.set_input("m", std::span<const std::int32_t>(m), {B, 1, 1, T});
    p.set_input("b", std::span<const float>(bias), {1, 2, T, T});
    p.set_input("probe", std::span<const float>(probe), {B, T, 2, 4});
    p.forward();
    p.backward();
  };
  run(a);
  run(b);
  same(a.output("y"), b.output("y"));
  same(a.input_grad("qkv"), b.input_grad("qkv"));
  same(a.input_grad("b"), b.input_grad("b"));
}

constexpr Msg packed_without_slots = [] {
  Builder g;
  attention_packed(g.input("qkv", {Batch, Seq, 2, 2, 4}));
  return g.error;
}();
TEST_CASE("packed_qkv refuses a qkv without its slot axis of 3, by name", "[ops][attention][errors]") {
  CHECK_THAT(std::string(packed_without_slots.view()), Catch::Matchers::Contains("packed_qkv needs qkv as [B, T, 3, H, d]"));
}
