// Kernel helpers custom ops use (ctgrad/ops/kernels.hpp): sums down the rows in row blocks.
#include <catch2/catch.hpp>

#include "../host.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <ctgrad/base/random.hpp>
#include <ctgrad/ops/detail/simd.hpp>
#include <ctgrad/ops/kernels.hpp>
#include <oneapi/tbb/task_arena.h>

using namespace ctgrad;

TEST_CASE("rows_with_column_sums adds or writes each column's sum, visits every row once, and gives the same bits on 1 and 2 threads",
          "[ops][kernels][determinism]") {
  // From one block (small) to the most blocks (64) and uneven row counts per block.
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{1, 5}, {7, 3}, {1000, 100}, {3001, 33}, {130, 1024}, {70000, 17}};
  for (auto [rows, width] : shapes) {
    INFO("rows " << rows << ", width " << width << ": " << kernel::sum_blocks(rows, width) << " blocks");
    std::vector<float> x(std::size_t(rows * width)), g(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = float(random::normal(random::key(1, "sums"), i));
      g[i] = float(random::normal(random::key(2, "sums"), i));
    }
    auto run = [&](std::vector<float>& added, std::vector<float>& written, std::vector<int>& visits) {
      added.assign(std::size_t(width), 1.5f);  // out[0] (+)=: starts at 1.5
      written.assign(std::size_t(width), std::numeric_limits<float>::quiet_NaN());  // out[1] =: garbage before
      visits.assign(std::size_t(rows), 0);
      float* const out[3] = {added.data(), written.data(), nullptr};  // the third sum is skipped
      rows_with_column_sums<float>(rows, width, 3, out, 2u, [&](std::int64_t r, float* acc) {
        ++visits[std::size_t(r)];
        vec::axpy(g.data() + r * width, acc, width);                                    // sum g
        for (std::int64_t j = 0; j < width; ++j) acc[width + j] += g[std::size_t(r * width + j)] * x[std::size_t(r * width + j)];  // sum g x
        acc[2 * width] = 7;  // the skipped sum's partials: written, never read
      });
    };
    std::vector<float> a1, w1, a2, w2;
    std::vector<int> v1, v2;
    tbb::task_arena one(1), two(2);
    one.execute([&] { run(a1, w1, v1); });
    two.execute([&] { run(a2, w2, v2); });
    for (std::int64_t r = 0; r < rows; ++r) REQUIRE(v1[std::size_t(r)] == 1);
    for (std::int64_t j = 0; j < width; ++j) {
      double sum_g = 0, sum_gx = 0, abs_g = 0, abs_gx = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const double gv = g[std::size_t(r * width + j)], xv = x[std::size_t(r * width + j)];
        sum_g += gv, sum_gx += gv * xv, abs_g += std::abs(gv), abs_gx += std::abs(gv * xv);
      }
      CHECK(a1[std::size_t(j)] == Approx(1.5 + sum_g).margin(1e-6 * abs_g + 1e-6));
      CHECK(w1[std::size_t(j)] == Approx(sum_gx).margin(1e-6 * abs_gx + 1e-6));
    }
    if (testing::two_cpus()) {
      CHECK(std::memcmp(a1.data(), a2.data(), a1.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(w1.data(), w2.data(), w1.size() * sizeof(float)) == 0);
      CHECK(v2 == v1);
    }
  }
}

// Float GELU takes a rational erf (ops/detail/simd_kernels.hpp): every instruction set's table
// stays within 2.5e-6 of double GELU over [-6, 6] (1.4e-6 measured, where 1 + erf cancels; the
// approximate reciprocal differs by vendor), its derivative within 2e-6 of double's (3e-7); far
// out it is exact (0 on the left, x on the right), and NaN stays NaN, in SIMD lanes and tails.
TEST_CASE("float GELU and its derivative match double precision on every instruction set", "[kernels]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> far = {nan, -50.f, -1e4f, -1e30f, 50.f, 1e4f, inf, 7.f, -7.f, nan};  // lanes 0-9; the last NaN in a tail
  const std::int64_t n = 120000;
  std::vector<float> x(far);
  for (std::int64_t i = 0; i < n; ++i) x.push_back(float(-6 + 12.0 * double(i) / double(n - 1)));
  x.push_back(nan);  // the tail of every vector width (10 + 120000 + 1 = 16 * 7500 + 11)
  const std::size_t total = x.size(), first = far.size();
  std::vector<float> y(total), g(total, 1.f), gx(total);
  for (const std::string& isa : simd::available()) {
    const simd::Table* t = simd::table(isa);
    REQUIRE(t);
    t->unary[simd::gelu][0](x.data(), y.data(), std::int64_t(total), 0);
    t->unary_vjp[simd::gelu][0](x.data(), y.data(), g.data(), gx.data(), std::int64_t(total), 0, true);
    double worst = 0, worst_d = 0;
    for (std::size_t i = first; i + 1 < total; ++i) {
      const double v = x[i], phi = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
      const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * 3.14159265358979323846);
      worst = std::max(worst, std::abs(double(y[i]) - v * phi));
      worst_d = std::max(worst_d, std::abs(double(gx[i]) - (phi + v * pdf)));
    }
    INFO(isa << ": worst GELU error " << worst << ", derivative " << worst_d);
    CHECK(worst < 2.5e-6);
    CHECK(worst_d < 2e-6);
    CHECK(std::isnan(y[0]));
    CHECK(std::isnan(y[9]));
    CHECK(std::isnan(y[total - 1]));
    CHECK(std::isnan(gx[0]));
    CHECK(y[1] == 0.f);  // -50: exactly 0, not a CPU-dependent sliver of x
    CHECK(y[2] == 0.f);
    CHECK(y[3] == 0.f);
    CHECK(gx[1] == 0.f);
    CHECK(y[4] == 50.f);
    CHECK(y[5] == 1e4f);
    CHECK(y[6] == inf);
    CHECK(gx[5] == 1.f);
    CHECK(std::abs(y[7] - 7.f) < 1e-6f);
    CHECK(std::abs(y[8]) < 1e-10f);
  }
}

// GPT-2's GELU, 0.5 x (1 + tanh u), on every instruction set, float and double: it and its
// derivative stay close to the formula in double precision over [-8, 8]; far left both are exactly
// 0 and far right x and 1, even where x^3 overflows (not 0 * inf = NaN), and NaN stays NaN, in
// SIMD lanes and tails.
TEST_CASE("GPT-2's GELU (tanh form) and its derivative match the tanh formula in double precision on every instruction set", "[kernels]") {
  auto check = [](auto zero, const simd::Table& t, double tol_f, double tol_d) {
    using T = decltype(zero);
    constexpr int ti = std::is_same_v<T, double> ? 1 : 0;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    const T big = std::numeric_limits<T>::max();  // x^2 overflows in double too
    const std::vector<T> far = {nan, T(-50), T(-1e4), T(-1e30), T(50), T(1e30), T(-12), T(-9.7), T(9), -big, big, nan};
    const std::int64_t n = 160000;
    std::vector<T> x(far);
    for (std::int64_t i = 0; i < n; ++i) x.push_back(T(-8 + 16.0 * double(i) / double(n - 1)));
    x.push_back(nan);
    const std::size_t total = x.size(), first = far.size();
    std::vector<T> y(total), g(total, T(1)), gx(total);
    t.unary[simd::gelu_tanh][ti](x.data(), y.data(), std::int64_t(total), 0);
    t.unary_vjp[simd::gelu_tanh][ti](x.data(), nullptr, g.data(), gx.data(), std::int64_t(total), 0, true);
    double worst = 0, worst_d = 0;
    for (std::size_t i = first; i + 1 < total; ++i) {
      const double v = x[i], c = 0.7978845608028654, th = std::tanh(c * (v + 0.044715 * v * v * v));
      const double du = c * (1 + 3 * 0.044715 * v * v);
      worst = std::max(worst, std::abs(double(y[i]) - 0.5 * v * (1 + th)));
      worst_d = std::max(worst_d, std::abs(double(gx[i]) - (0.5 * (1 + th) + 0.5 * v * (1 - th * th) * du)));
    }
    INFO(t.arch << (ti ? " double" : " float") << ": worst error " << worst << ", derivative " << worst_d);
    CHECK(worst < tol_f);
    CHECK(worst_d < tol_d);
    for (std::size_t i : {std::size_t(0), std::size_t(11), total - 1}) CHECK((std::isnan(y[i]) && std::isnan(gx[i])));
    for (std::size_t i : {1, 2, 3, 6, 7, 9}) CHECK((y[i] == T(0) && gx[i] == T(0)));
    CHECK(y[4] == T(50));
    CHECK(y[5] == T(1e30));
    CHECK(y[10] == big);
    for (std::size_t i : {4, 5, 10}) CHECK(gx[i] == T(1));
    CHECK(std::abs(y[8] - T(9)) <= T(9) * std::numeric_limits<T>::epsilon());
  };
  for (const std::string& isa : simd::available()) {
    const simd::Table* t = simd::table(isa);
    REQUIRE(t);
    check(float{}, *t, 1e-6, 1e-6);
    check(double{}, *t, 1e-14, 1e-14);
  }
}

// The transpose attention uses for K^T and V^T: every instruction set's table, float and double,
// rows that fill whole gathers and a tail, strided source and destination, a destination wider
// than the copy (its other elements untouched), and an exact copy of every element.
TEST_CASE("transpose copies every element on every instruction set", "[kernels]") {
  auto check = [](auto zero, const simd::Table& t, std::int64_t rows, std::int64_t cols, std::int64_t lds, std::int64_t ldd) {
    using T = decltype(zero);
    constexpr int ti = std::is_same_v<T, double> ? 1 : 0;
    std::vector<T> src(std::size_t(rows * lds)), dst(std::size_t(cols * ldd), T(-7));
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = T(0.5) + T(i);
    t.transpose[ti](src.data(), lds, rows, cols, dst.data(), ldd);
    std::int64_t wrong = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      for (std::int64_t r = 0; r < ldd; ++r)
        wrong += dst[std::size_t(c * ldd + r)] != (r < rows ? src[std::size_t(r * lds + c)] : T(-7));
    INFO(t.arch << (ti ? " double" : " float") << ": " << rows << " x " << cols << ", lds " << lds << ", ldd " << ldd);
    CHECK(wrong == 0);
  };
  for (const std::string& isa : simd::available()) {
    const simd::Table* t = simd::table(isa);
    REQUIRE(t);
    for (auto [rows, cols, lds, ldd] : {std::array<std::int64_t, 4>{50, 32, 384, 50}, {64, 16, 16, 70}, {3, 5, 5, 3}, {17, 1, 96, 40}, {0, 4, 4, 0}}) {
      check(float{}, *t, rows, cols, lds, ldd);
      check(double{}, *t, rows, cols, lds, ldd);
    }
  }
}

// Cross-entropy's row gradient g exp(x - lse) - off, written or added, on every instruction set:
// a row with a tail for every vector width, against the formula in double precision.
TEST_CASE("the cross-entropy row gradient matches its formula on every instruction set", "[kernels]") {
  auto check = [](auto zero, const simd::Table& t, bool assign) {
    using T = decltype(zero);
    constexpr int ti = std::is_same_v<T, double> ? 1 : 0;
    const std::int64_t n = 37;
    std::vector<T> x(n), gx(n, T(0.25));
    for (std::int64_t i = 0; i < n; ++i) x[std::size_t(i)] = T(-3 + 0.17 * double(i));
    const double lse = 2.5, g = 0.125, off = 0.003;
    t.xent_grad_row[ti](x.data(), gx.data(), n, lse, g, off, assign);
    double worst = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double want = (assign ? 0 : 0.25) + g * std::exp(double(x[std::size_t(i)]) - lse) - off;
      worst = std::max(worst, std::abs(double(gx[std::size_t(i)]) - want));
    }
    INFO(t.arch << (ti ? " double" : " float") << (assign ? ", written" : ", added") << ": worst error " << worst);
    CHECK(worst < (ti ? 1e-15 : 2e-7));
  };
  for (const std::string& isa : simd::available()) {
    const simd::Table* t = simd::table(isa);
    REQUIRE(t);
    for (bool assign : {true, false}) {
      check(float{}, *t, assign);
      check(double{}, *t, assign);
    }
  }
}
