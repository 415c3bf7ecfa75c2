// The GEMM behind matmul: backend, every transpose form against a double-precision reference,
// block splits, and bitwise determinism across thread counts.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <ctgrad/graph/random.hpp>
#include <ctgrad/ops/detail/gemm.hpp>
#include <oneapi/tbb/task_arena.h>

using namespace ctgrad;

namespace {
std::vector<float> randn(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(random::normal(random::key(seed, "gemm"), i));
  return v;
}
}  // namespace

TEST_CASE("matmul runs on OpenBLAS with one thread per call and starts no threads", "[ops][gemm]") {
  INFO(kernel::gemm_backend());
  CHECK(kernel::gemm_uses_blas());
  CHECK(kernel::gemm_backend().find("1 thread per call") != std::string::npos);
}

TEST_CASE("concurrent gemm calls from oneTBB tasks give the serial results", "[ops][gemm]") {
  // The shape of the harness case that exposed a race in OpenBLAS's single-threaded build.
  const std::int64_t M = 3000, N = 50, K = 40;
  auto A = randn(std::size_t(M * K), 6), B = randn(std::size_t(N * K), 7);
  std::vector<double> Ad(A.begin(), A.end()), Bd(B.begin(), B.end());
  std::vector<double> want(std::size_t(M * N)), got(std::size_t(M * N));
  tbb::task_arena one(1), two(2);
  one.execute([&] { kernel::gemm(false, true, M, N, K, Ad.data(), K, Bd.data(), K, want.data(), N, false); });
  int differ = 0;
  for (int it = 0; it < 300; ++it) {
    two.execute([&] { kernel::gemm(false, true, M, N, K, Ad.data(), K, Bd.data(), K, got.data(), N, false); });
    differ += std::memcmp(want.data(), got.data(), got.size() * sizeof(double)) != 0;
  }
  CHECK(differ == 0);
}

TEST_CASE("gemm matches a double-precision reference in every form", "[ops][gemm]") {
  // Sizes include odd ones and ones large enough to be split into blocks along M or N.
  struct S { std::int64_t M, N, K; };
  for (S s : {S{1, 1, 1}, S{7, 5, 3}, S{33, 17, 65}, S{600, 40, 50}, S{40, 700, 60}, S{513, 257, 129}}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool acc : {false, true}) {
          auto A = randn(std::size_t(s.M * s.K), 1), B = randn(std::size_t(s.K * s.N), 2);
          auto C = randn(std::size_t(s.M * s.N), 3);
          std::vector<double> want(C.begin(), C.end());
          const std::int64_t lda = ta ? s.M : s.K, ldb = tb ? s.K : s.N;
          for (std::int64_t i = 0; i < s.M; ++i)
            for (std::int64_t j = 0; j < s.N; ++j) {
              double sum = acc ? want[std::size_t(i * s.N + j)] : 0.0;
              for (std::int64_t k = 0; k < s.K; ++k)
                sum += double(ta ? A[std::size_t(k * lda + i)] : A[std::size_t(i * lda + k)]) *
                       double(tb ? B[std::size_t(j * ldb + k)] : B[std::size_t(k * ldb + j)]);
              want[std::size_t(i * s.N + j)] = sum;
            }
          kernel::gemm(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), s.N, acc);
          double worst = 0;
          for (std::size_t e = 0; e < C.size(); ++e) worst = std::max(worst, std::abs(C[e] - want[e]));
          INFO("M" << s.M << " N" << s.N << " K" << s.K << " ta" << ta << " tb" << tb << " acc" << acc);
          CHECK(worst < 1e-4 * std::sqrt(double(s.K)) + 1e-5);
        }
  }
}

TEST_CASE("gemm gives the same bits on 1 and 2 threads", "[ops][gemm][determinism]") {
  const std::int64_t M = 1100, N = 300, K = 257;
  auto A = randn(std::size_t(M * K), 4), B = randn(std::size_t(K * N), 5);
  std::vector<float> one(std::size_t(M * N)), two(std::size_t(M * N));
  tbb::task_arena a1(1), a2(2);
  a1.execute([&] { kernel::gemm(false, true, M, N, K, A.data(), K, B.data(), K, one.data(), N, false); });
  a2.execute([&] { kernel::gemm(false, true, M, N, K, A.data(), K, B.data(), K, two.data(), N, false); });
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
}
