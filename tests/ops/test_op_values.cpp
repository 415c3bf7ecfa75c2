// Op values against direct formulas, and numerics at extreme inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>

using namespace ctgrad;

namespace {
template <class P>
std::vector<double> out(P& p, const char* name) {
  auto v = p.output(name);
  return std::vector<double>(v.data, v.data + v.numel);
}
bool all_finite(const std::vector<double>& v) {
  for (double x : v)
    if (!std::isfinite(x)) return false;
  return true;
}
}  // namespace

constexpr auto extreme = [] {
  Builder g;
  Value x = g.input("x", {2, 4}, {.grad = true});
  Value t = g.input("t", {2}, {.dtype = DType::index});
  g.output(softmax(x), "softmax");
  g.output(log_softmax(x), "log_softmax");
  g.loss(cross_entropy(x, t, {.label_smoothing = 0.1}));
  return g;
};
static constexpr auto EXTREME = freeze<extreme>();

TEST_CASE("softmax, log_softmax and cross_entropy stay finite for logits of +-1e4", "[ops][numerics]") {
  Program<EXTREME> p;
  std::vector<float> x = {1e4f, -1e4f, 0, 1e4f, -1e4f, -1e4f, -1e4f, -1e4f};
  std::vector<std::int32_t> t = {1, 2};
  p.set_input("x", std::span<const float>(x), {2, 4});
  p.set_input("t", std::span<const std::int32_t>(t), {2});
  p.forward();
  p.backward();
  auto sm = out(p, "softmax"), lsm = out(p, "log_softmax");
  CHECK(all_finite(sm));
  CHECK(all_finite(lsm));
  CHECK(sm[0] == Approx(0.5));   // two equal maxima share the mass
  CHECK(sm[4] == Approx(0.25));  // an all-equal row is uniform
  CHECK(lsm[1] == Approx(-2e4 - std::log(2.0)).epsilon(1e-6));
  CHECK(std::isfinite(p.loss()));
  auto g = p.input_grad("x");
  CHECK(all_finite(std::vector<double>(g.data, g.data + g.numel)));
}

constexpr auto patches = [] {
  Builder g;
  Value img = g.input("img", {Batch, 3, 8, 12});
  g.output(patch_embed(img, g.param("w", {5, 3 * 4 * 4}, init::normal(0.1)), g.param("b", {5}, init::normal(0.1)), 4), "y");
  return g;
};
static constexpr auto PATCHES = freeze<patches>();

TEST_CASE("patch embedding equals a convolution with kernel = stride = patch size", "[ops][values]") {
  Program<PATCHES, double> p(Options{.seed = 3});
  const int B = 2, C = 3, H = 8, W = 12, P = 4, D = 5;
  std::vector<double> img(std::size_t(B * C * H * W));
  for (std::size_t i = 0; i < img.size(); ++i) img[i] = random::normal(9, i);
  p.set_input("img", std::span<const double>(img), {B, C, H, W});
  p.forward();
  auto y = p.output("y");
  REQUIRE(y.numel == B * (H / P) * (W / P) * D);
  const auto &w = p.parameter("w").value, &b = p.parameter("b").value;
  for (int n = 0; n < B; ++n)
    for (int py = 0; py < H / P; ++py)
      for (int px = 0; px < W / P; ++px)
        for (int d = 0; d < D; ++d) {
          double conv = b[d];  // Conv2d(C, D, kernel P, stride P), weight [D, C, P, P]
          for (int c = 0; c < C; ++c)
            for (int i = 0; i < P; ++i)
              for (int j = 0; j < P; ++j)
                conv += w[(d * C + c) * P * P + i * P + j] * img[std::size_t(((n * C + c) * H + py * P + i) * W + px * P + j)];
          CHECK(y[((n * (H / P) + py) * (W / P) + px) * D + d] == Approx(conv).epsilon(1e-12));
        }
}

constexpr auto drop = [] {
  Builder g;
  g.output(dropout(g.input("x", {Batch, 1000}), 0.25), "y");
  return g;
};
static constexpr auto DROP = freeze<drop>();

TEST_CASE("dropout keeps 1-p of the values, scaled, is the identity in inference and draws a new mask each step", "[ops][values]") {
  Program<DROP> p(Options{.seed = 5});
  std::vector<float> x(4000, 1.0f);
  p.set_input("x", std::span<const float>(x), {4, 1000});
  p.forward();
  auto first = out(p, "y");
  int kept = 0;
  for (double v : first) {
    CHECK((v == 0.0 || v == Approx(1 / 0.75)));
    kept += v != 0;
  }
  CHECK(kept == Approx(3000).margin(120));  // binomial(4000, 0.75): sd 27
  p.forward();
  CHECK(out(p, "y") != first);
  p.set_steps(0);
  p.forward();
  CHECK(out(p, "y") == first);  // same step, same mask
  p.forward(Mode::infer);
  for (double v : out(p, "y")) CHECK(v == 1.0);
}

constexpr auto drop_both = [] {
  Builder g;
  Value x = g.input("x", {Batch, 2, 6, 4});
  g.output(dropout(x, 0.3), "y");
  g.output(attention(x, x, x, {.dropout = 0.3}), "a");
  return g;
};
static constexpr auto DROP_BOTH = freeze<drop_both>();

TEST_CASE("a data-parallel shard draws the dropout masks of its rows of the global batch", "[ops][values][distributed]") {
  // Rows 0..5 in one process, or rows 0..2 as shard 0 and 3..5 as shard 1: the same bits.
  std::vector<float> x(6 * 2 * 6 * 4);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(double(i)));
  Program<DROP_BOTH> whole(Options{.seed = 9});
  whole.set_input("x", std::span<const float>(x), {6, 2, 6, 4});
  whole.forward();
  for (const char* name : {"y", "a"}) {
    const auto all = out(whole, name);
    std::vector<double> joined;
    for (int shard = 0; shard < 2; ++shard) {
      Program<DROP_BOTH> part(Options{.seed = 9});
      part.set_random_shard(std::uint64_t(shard));
      part.set_input("x", std::span<const float>(x).subspan(std::size_t(shard) * x.size() / 2, x.size() / 2), {3, 2, 6, 4});
      part.forward();
      const auto o = out(part, name);
      joined.insert(joined.end(), o.begin(), o.end());
    }
    INFO(name);
    CHECK(joined == all);
  }
  Program<DROP_BOTH> unsharded(Options{.seed = 9});  // shard 1's rows drawn as shard 0: other masks
  unsharded.set_input("x", std::span<const float>(x).subspan(x.size() / 2), {3, 2, 6, 4});
  unsharded.forward();
  const auto all = out(whole, "y");
  CHECK(out(unsharded, "y") != std::vector<double>(all.begin() + long(all.size() / 2), all.end()));
}

constexpr auto masks = [] {
  Builder g;
  g.input("x", {Batch, Seq, 2});
  g.input("keys", {SeqKV});
  g.output(causal_mask(g, Seq), "causal");
  g.output(causal_mask(g, Seq, SeqKV), "causal_aligned");  // decoding: the keys hold the past too
  g.output(key_padding_mask(g.input("len", {Batch}, {.dtype = DType::index}), Seq, 1), "padding");
  return g;
};
static constexpr auto MASKS = freeze<masks>();

TEST_CASE("causal and key-padding masks", "[ops][values]") {
  Program<MASKS> p;
  std::vector<float> x(2 * 3 * 2), keys(5);
  std::vector<std::int32_t> len = {3, 1};
  p.set_input("x", std::span<const float>(x), {2, 3, 2});
  p.set_input("keys", std::span<const float>(keys), {5});
  p.set_input("len", std::span<const std::int32_t>(len), {2});
  p.forward();
  auto ints = [&](const char* name) {
    const auto t = p.index_output(name);
    return std::vector<int>(t.data, t.data + t.numel);
  };
  CHECK(ints("causal") == std::vector<int>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  CHECK(ints("causal_aligned") == std::vector<int>{1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1});  // [3, 5]
  CHECK(ints("padding") == std::vector<int>{1, 1, 1, 1, 0, 0});  // [Batch, 1, Seq]
  std::vector<std::int32_t> bad = {4, 1};
  p.set_input("len", std::span<const std::int32_t>(bad), {2});
  CHECK_THROWS_WITH(p.forward(), Catch::Matchers::Contains("op key_padding_mask: length 4 of sequence 0"));
}

constexpr auto norms = [] {
  Builder g;
  Value x = g.input("x", {2, 5});
  Value gamma = g.input("gamma", {5}), beta = g.input("beta", {5});
  g.output(layer_norm(x, gamma, beta, {.eps = 1e-5}), "standard");
  g.output(layer_norm(x, gamma, beta, {.eps = 1e-6, .form = NormForm::std_plus_eps}), "std_eps");
  g.output(rms_norm(x, gamma, 1e-6), "rms");
  Value t = g.input("t", {2}, {.dtype = DType::index});
  g.output(cross_entropy(x, t, {.label_smoothing = 0.2}), "ce");
  return g;
};
static constexpr auto NORMS = freeze<norms>();

TEST_CASE("norm forms and label smoothing match their formulas", "[ops][values]") {
  Program<NORMS, double> p;
  std::vector<double> x = {1, 2, 4, 7, 11, -3, 0, 3, 1, 2}, gamma = {1, 2, 0.5, 1, -1}, beta = {0, 1, 0, -1, 0.5};
  std::vector<std::int32_t> t = {3, 0};
  p.set_input("x", std::span<const double>(x), {2, 5});
  p.set_input("gamma", std::span<const double>(gamma), {5});
  p.set_input("beta", std::span<const double>(beta), {5});
  p.set_input("t", std::span<const std::int32_t>(t), {2});
  p.forward(Mode::infer);
  auto standard = out(p, "standard"), std_eps = out(p, "std_eps"), rms = out(p, "rms");
  double ce = 0;
  for (int r = 0; r < 2; ++r) {
    const double* xr = &x[std::size_t(r * 5)];
    double mean = 0, ss = 0, sq = 0, mx = -1e30, se = 0;
    for (int j = 0; j < 5; ++j) mean += xr[j] / 5, sq += xr[j] * xr[j] / 5, mx = std::max(mx, xr[j]);
    for (int j = 0; j < 5; ++j) ss += (xr[j] - mean) * (xr[j] - mean), se += std::exp(xr[j] - mx);
    const double lse = mx + std::log(se);
    double mean_nll = 0;
    for (int j = 0; j < 5; ++j) {
      CHECK(standard[std::size_t(r * 5 + j)] == Approx((xr[j] - mean) / std::sqrt(ss / 5 + 1e-5) * gamma[std::size_t(j)] + beta[std::size_t(j)]));
      CHECK(std_eps[std::size_t(r * 5 + j)] == Approx((xr[j] - mean) / (std::sqrt(ss / 4) + 1e-6) * gamma[std::size_t(j)] + beta[std::size_t(j)]));
      CHECK(rms[std::size_t(r * 5 + j)] == Approx(xr[j] / std::sqrt(sq + 1e-6) * gamma[std::size_t(j)]));
      mean_nll += (lse - xr[j]) / 5;
    }
    ce += (0.8 * (lse - xr[t[std::size_t(r)]]) + 0.2 * mean_nll) / 2;
  }
  CHECK(out(p, "ce")[0] == Approx(ce).epsilon(1e-12));
}

constexpr auto powers = [] {
  Builder g;
  Value x = g.input("x", {37}, {.grad = true});  // 37: SIMD lanes and a scalar tail
  g.output(pow(x, 0.5), "p05");
  g.output(pow(x, 0.0), "p0");
  g.output(pow(x, -1.0), "pm1");
  g.loss(sum(pow(x, 1.0)) + sum(pow(x, 2.0)) + sum(pow(x, 0.0)));
  return g;
};
static constexpr auto POWERS = freeze<powers>();

TEST_CASE("pow at zero follows std::pow in every lane and in the tail", "[ops][values][numerics]") {
  Program<POWERS> p;
  std::vector<float> x(37, 0.0f);
  p.set_input("x", std::span<const float>(x), {37});
  p.forward();
  p.backward();
  for (double v : out(p, "p05")) CHECK(v == 0.0);
  for (double v : out(p, "p0")) CHECK(v == 1.0);
  for (double v : out(p, "pm1")) CHECK(std::isinf(v));
  auto g = p.input_grad("x");  // d/dx (x + x^2 + x^0) at 0 = 1
  for (std::int64_t i = 0; i < g.numel; ++i) CHECK(g[i] == 1.0f);
}

constexpr auto positions = [] {
  Builder g;
  g.input("x", {Batch, Seq, 6});
  g.output(sinusoidal_positions(g, Seq, 6), "pe");
  g.output(prefix_rows(g.param("pos", {4, 6}, init::normal(1.0)), Seq), "learned");

  g.output(sinusoidal_positions_at(g.input("at", {SeqKV}, {.dtype = DType::index}), 6), "pe_at");
  return g;
};
static constexpr auto POSITIONS = freeze<positions>();

TEST_CASE("sinusoidal positions, learned positions and their length limit", "[ops][values]") {
  Program<POSITIONS, double> p;
  std::vector<double> x(2 * 3 * 6);
  const std::vector<std::int32_t> at{2, 0, 7};  // decoding: the rows of given positions
  p.set_input("x", std::span<const double>(x), {2, 3, 6});
  p.set_input("at", std::span<const std::int32_t>(at), {3});
  p.forward();
  auto pe_at = out(p, "pe_at");
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 6; i += 2) {
      const double w = 1 / std::pow(10000.0, double(i) / 6);
      CHECK(pe_at[std::size_t(r * 6 + i)] == Approx(std::sin(at[std::size_t(r)] * w)));
      CHECK(pe_at[std::size_t(r * 6 + i + 1)] == Approx(std::cos(at[std::size_t(r)] * w)));
    }
  auto pe = out(p, "pe");
  for (int pos = 0; pos < 3; ++pos)
    for (int i = 0; i < 6; i += 2) {
      const double w = 1 / std::pow(10000.0, double(i) / 6);
      CHECK(pe[std::size_t(pos * 6 + i)] == Approx(std::sin(pos * w)));
      CHECK(pe[std::size_t(pos * 6 + i + 1)] == Approx(std::cos(pos * w)));
    }
  std::vector<double> long_x(2 * 5 * 6);
  p.set_input("x", std::span<const double>(long_x), {2, 5, 6});
  CHECK_THROWS_WITH(p.forward(), Catch::Matchers::Contains("a sequence of length 5 is longer than the 4 positions"));
}

TEST_CASE("T5 relative position buckets", "[ops][values]") {
  // Bidirectional, 32 buckets, max distance 128: relative = key - query.
  CHECK(relative_position_bucket(0, true, 32, 128) == 0);
  CHECK(relative_position_bucket(1, true, 32, 128) == 17);
  CHECK(relative_position_bucket(-1, true, 32, 128) == 1);
  CHECK(relative_position_bucket(-8, true, 32, 128) == 8);
  CHECK(relative_position_bucket(-127, true, 32, 128) == 15);
  CHECK(relative_position_bucket(-200, true, 32, 128) == 15);
  CHECK(relative_position_bucket(200, true, 32, 128) == 31);
  // Causal: future keys share bucket 0.
  CHECK(relative_position_bucket(5, false, 32, 128) == 0);
  CHECK(relative_position_bucket(-5, false, 32, 128) == 5);
}

constexpr auto selection = [] {
  Builder g;
  Value x = g.input("x", {2, 5});
  Value src = g.input("src", {4, 2});
  Value idx = g.input("idx", {4}, {.dtype = DType::index});
  const TopK best = top_k(x, 3);
  g.output(best.indices, "indices");
  g.output(best.values, "values");
  g.output(scatter_add_rows(src, idx, 3), "scattered");
  return g;
};
static constexpr auto SELECTION = freeze<selection>();

TEST_CASE("top-k orders by value, ties by index, NaN last, and scatter_add_rows sums rows in order and drops -1", "[ops][values]") {
  Program<SELECTION> p;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x{1, 3, 3, nan, 2, nan, -1, nan, -5, 0};
  const std::vector<float> src{1, 2, 10, 20, 100, 200, 1000, 2000};
  const std::vector<std::int32_t> idx{2, -1, 2, 0};
  p.set_input("x", std::span<const float>(x), {2, 5});
  p.set_input("src", std::span<const float>(src), {4, 2});
  p.set_input("idx", std::span<const std::int32_t>(idx), {4});
  p.forward();
  const auto ind = p.index_output("indices");
  CHECK(std::vector<int>(ind.data, ind.data + ind.numel) == std::vector<int>{1, 2, 4, 4, 1, 3});  // row 1: 0, -1, -5; its NaNs last
  const auto val = p.output("values");
  CHECK(val[0] == 3.0f);
  CHECK(val[2] == 2.0f);
  CHECK(val[4] == -1.0f);
  const auto sc = p.output("scattered");
  CHECK(std::vector<float>(sc.data, sc.data + sc.numel) == std::vector<float>{1000, 2000, 0, 0, 101, 202});
  const std::vector<std::int32_t> bad{2, -2, 0, 0};
  p.set_input("idx", std::span<const std::int32_t>(bad), {4});
  CHECK_THROWS_WITH(p.forward(), Catch::Matchers::Contains("op scatter_add_rows: index -2 at row 1 is outside [-1, 3)"));
}

constexpr auto routing = [] {
  Builder g;
  Value idx = g.input("idx", {Seq, 2}, {.dtype = DType::index});
  const Dim capacity = g.derive(Sym3, Seq, 0.6);  // ceil(0.6 tokens) rows per expert, no input carries it
  Value src = expert_sources(idx, 2, capacity);
  Value slots = expert_slots(idx, src, 2);
  g.output(src, "sources");
  g.output(slots, "slots");
  g.output(mean(negative_mask(slots)), "dropped");
  g.output(one_hot(slots, 6), "one_hot");
  return g;
};
static constexpr auto ROUTING = freeze<routing>();

TEST_CASE("expert routing: first choices before second ones, in token order, dropped over a derived capacity", "[ops][values]") {
  Program<ROUTING> p;
  const std::vector<std::int32_t> idx{0, 1, 0, 1, 1, 0, 0, 1, 0, 1};  // 5 tokens' two experts of 2
  p.set_input("idx", std::span<const std::int32_t>(idx), {5, 2});
  p.forward();
  const auto src = p.index_output("sources");  // capacity ceil(5 x 0.6) = 3
  CHECK(std::vector<int>(src.data, src.data + src.numel) == std::vector<int>{0, 1, 3, 2, 0, 1});
  const auto slots = p.index_output("slots");
  CHECK(std::vector<int>(slots.data, slots.data + slots.numel) == std::vector<int>{0, 4, 1, 5, 3, -1, 2, -1, -1, -1});
  CHECK(p.output("dropped")[0] == 0.4f);  // token 2's second choice, token 3's, both of token 4's
  const auto oh = p.output("one_hot");
  CHECK((oh.numel == 60 && oh[4 * 6 + 3] == 1.0f && oh[1 * 6 + 4] == 1.0f));
  for (int c = 0; c < 6; ++c) CHECK(oh[5 * 6 + c] == 0.0f);  // a dropped choice is a zero row
  const std::vector<std::int32_t> bad{0, 1, 0, 2, 1, 0, 0, 1, 0, 1};
  p.set_input("idx", std::span<const std::int32_t>(bad), {5, 2});
  CHECK_THROWS_WITH(p.forward(), Catch::Matchers::Contains("op expert_sources: index 2 at row 1 is outside [0, 2)"));
  const std::vector<std::int32_t> one{1, 0};  // one token: the capacity is at least 1
  p.set_input("idx", std::span<const std::int32_t>(one), {1, 2});
  p.forward();
  const auto src1 = p.index_output("sources");
  CHECK(std::vector<int>(src1.data, src1.data + src1.numel) == std::vector<int>{0, 0});
}

// Arithmetic with numbers (ops/unary.hpp): Gemma's (1 + w) norm gain, 1 - p, x / 2; a constant 0
// added or 1 divided by adds no node; a hyperparameter is never folded.
constexpr auto scalars = [] {
  Builder g;
  Value x = g.input("x", {2, 3}, {.grad = true});
  const Real h = g.hyper("h", 0.25);
  g.output(1.0 + x, "one_plus"), g.output(x + 2, "plus_two"), g.output(x - 0.5, "minus_half"), g.output(1.0 - x, "one_minus");
  g.output(x / 4.0, "quarter"), g.output(x - h, "minus_h"), g.output(h + x, "h_plus"), g.output(x * h, "times_h");
  g.loss(sum(mul(1.0 - x, x + 0.0)));
  return g;
};
static constexpr auto SCALARS = freeze<scalars>();
constexpr int scalar_nodes = [] {
  Builder g;
  Value x = g.input("x", {2});
  g.output((x + 0.0) / 1.0 - 0.0);
  return int(g.nodes.size());
}();

TEST_CASE("arithmetic with numbers: x + s, s + x, x - s, s - x, x / s, constants folded, hyperparameters not", "[ops][numerics]") {
  STATIC_REQUIRE(scalar_nodes == 1);  // the input alone
  Program<SCALARS> p;
  const std::vector<float> x = {-1.5f, 0, 0.5f, 2, 3, -4};
  p.set_input("x", std::span<const float>(x), {2, 3});
  p.zero_grad();
  p.forward();
  p.backward();
  auto at = [&](const char* name, std::size_t i) { return double(p.output(name).data[i]); };
  for (std::size_t i = 0; i < x.size(); ++i) {
    CHECK(at("one_plus", i) == 1.0 + x[i]);
    CHECK(at("plus_two", i) == 2.0 + x[i]);
    CHECK(at("minus_half", i) == x[i] - 0.5);
    CHECK(at("one_minus", i) == 1.0 - x[i]);
    CHECK(at("quarter", i) == x[i] / 4.0);
    CHECK(at("minus_h", i) == x[i] - 0.25);
    CHECK(at("h_plus", i) == x[i] + 0.25);
    CHECK(double(p.input_grad("x").data[i]) == Approx(1.0 - 2.0 * x[i]));  // d/dx (1 - x) x
  }
  p.set_hyper("h", 2.0);
  p.forward(Mode::infer);
  CHECK(at("minus_h", 3) == 0.0);
  CHECK(at("h_plus", 3) == 4.0);
  CHECK(at("times_h", 3) == 4.0);  // the factor follows the hyperparameter
}

constexpr Msg divide_by_hyper = [] {
  Builder g;
  Value x = g.input("x", {2});
  g.output(x / g.hyper("h", 2.0));
  return g.error;
}();
TEST_CASE("dividing by a hyperparameter is refused, not frozen at its default", "[ops][numerics]") {
  CHECK(std::string(divide_by_hyper.view()).find("x / s: s is a hyperparameter") == 0);
}
