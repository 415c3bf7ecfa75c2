// Kernel helpers custom ops use (ctgrad/ops/kernels.hpp): sums down the rows in row blocks.
#include <catch2/catch.hpp>

#include "../host.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <ctgrad/graph/random.hpp>
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
