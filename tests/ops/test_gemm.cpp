// The GEMM behind matmul: backend, every transpose form against a double-precision reference,
// block splits, and bitwise determinism across thread counts.
#include <catch2/catch.hpp>

#include "../host.hpp"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include <ctgrad/base/random.hpp>
#include <ctgrad/ops/detail/cpu.hpp>
#include <ctgrad/ops/detail/gemm.hpp>
#include <ctgrad/ops/detail/simd.hpp>
#include <oneapi/tbb/task_arena.h>

using namespace ctgrad;

namespace {
std::vector<float> randn(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(random::normal(random::key(seed, "gemm"), i));
  return v;
}

// Entry (i, j) of op(A) op(B) in double precision: the reference.
double reference_entry(const std::vector<float>& A, std::int64_t lda, bool ta, const std::vector<float>& B, std::int64_t ldb, bool tb,
                       std::int64_t i, std::int64_t j, std::int64_t K) {
  double sum = 0;
  for (std::int64_t k = 0; k < K; ++k)
    sum += double(ta ? A[std::size_t(k * lda + i)] : A[std::size_t(i * lda + k)]) * double(tb ? B[std::size_t(j * ldb + k)] : B[std::size_t(k * ldb + j)]);
  return sum;
}

// `run(c)` on an arena of 1 thread and on one of 2, each from a copy of `c0`: the two results.
template <class F>
std::pair<std::vector<float>, std::vector<float>> on_1_and_2_threads(const std::vector<float>& c0, F run) {
  std::vector<float> one = c0, two = c0;
  tbb::task_arena a1(1), a2(2);
  a1.execute([&] { run(one.data()); });
  a2.execute([&] { run(two.data()); });
  return {std::move(one), std::move(two)};
}
bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("matmul runs on OpenBLAS with one thread per call and starts no threads", "[ops][gemm]") {
  INFO(kernel::gemm_backend());
  CHECK(kernel::gemm_uses_blas());
  CHECK(kernel::gemm_backend().find("1 thread per call") != std::string::npos);
}

TEST_CASE("the kernels chosen at run time need nothing this CPU lacks", "[ops][gemm][portability]") {
  const cpu::Features& f = cpu::features();
  INFO(cpu::describe() << "; " << kernel::gemm_backend());
  // ctgrad's own SIMD table: the best set the CPU runs.
  const std::string arch = simd::best().arch;
  if (!std::getenv("CTGRAD_SIMD")) CHECK(arch == (f.runs_avx512() ? "avx512" : f.runs_avx2() ? "avx2" : "sse2"));
  if (!f.runs_avx2()) CHECK(simd::table("avx2") == nullptr);
  if (!f.runs_avx512()) CHECK(simd::table("avx512") == nullptr);
  // OpenBLAS's kernels, whatever OPENBLAS_CORETYPE or CTGRAD_BLAS_CORE say (the no-AVX CTest runs
  // set both to Haswell): the best this CPU runs unless CTGRAD_BLAS_CORE chose one it runs.
  const std::string backend = kernel::gemm_backend();
  const auto at = backend.rfind(", core ");
  REQUIRE(at != std::string::npos);
  const std::string core = backend.substr(at + 7, backend.size() - at - 8);
  const std::string lacks = cpu::openblas_core_lacks(core, f);
  CHECK((lacks.empty() || lacks == "unknown core"));
  const char* forced = std::getenv("CTGRAD_BLAS_CORE");
  const std::string_view best = cpu::best_openblas_core(f);
  if (!best.empty() && !(forced && cpu::openblas_core_lacks(forced, f).empty())) CHECK(Catch::toLower(core) == Catch::toLower(std::string(best)));
}

TEST_CASE("OpenBLAS cores are matched against what a CPU runs", "[ops][gemm][portability]") {
  cpu::Features nehalem;  // SSE up to 4.2, no AVX (qemu's Nehalem model)
  nehalem.sse2 = nehalem.sse3 = nehalem.ssse3 = nehalem.sse4_1 = nehalem.sse4_2 = true;
  CHECK(cpu::openblas_core_lacks("Nehalem", nehalem).empty());
  CHECK(cpu::openblas_core_lacks("PRESCOTT", nehalem).empty());
  CHECK(cpu::openblas_core_lacks("Haswell", nehalem) == "avx2, fma");
  CHECK(cpu::openblas_core_lacks("Sandybridge", nehalem) == "avx");
  CHECK(cpu::openblas_core_lacks("Barcelona", nehalem) == "sse4a");
  cpu::Features zen3 = nehalem;  // AVX2, no AVX-512
  zen3.avx = zen3.fma = zen3.avx2 = zen3.sse4a = true;
  CHECK(cpu::openblas_core_lacks("Zen", zen3).empty());
  CHECK(cpu::openblas_core_lacks("haswell", zen3).empty());
  CHECK(cpu::openblas_core_lacks("SkylakeX", zen3) == "avx512f, avx512cd, avx512dq, avx512bw, avx512vl");
  cpu::Features zen4 = zen3;  // AVX-512 with BF16, no AMX
  zen4.avx512f = zen4.avx512cd = zen4.avx512dq = zen4.avx512bw = zen4.avx512vl = zen4.avx512bf16 = true;
  CHECK(cpu::openblas_core_lacks("Cooperlake", zen4).empty());
  CHECK(cpu::openblas_core_lacks("SapphireRapids", zen4).empty());  // its sgemm is SkylakeX's: no AMX needed
  CHECK(cpu::openblas_core_lacks("SapphireRapids", zen3) == "avx512f, avx512cd, avx512dq, avx512bw, avx512vl");

  CHECK(cpu::openblas_core_lacks("Zen9", zen4) == "unknown core");
  CHECK(!zen3.runs_avx512());
  CHECK(zen4.runs_avx512());
  CHECK(!nehalem.runs_avx2());
}

TEST_CASE("concurrent gemm calls from oneTBB tasks give the serial results", "[ops][gemm]") {
  // The shape of the harness case that exposed a race in OpenBLAS's single-threaded build.
  const std::int64_t M = 3000, N = 50, K = 40;
  auto A = randn(std::size_t(M * K), 6), B = randn(std::size_t(N * K), 7);
  std::vector<double> Ad(A.begin(), A.end()), Bd(B.begin(), B.end());
  std::vector<double> want(std::size_t(M * N)), got(std::size_t(M * N));
  if (!ctgrad::testing::two_cpus()) return;
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
  if (!ctgrad::testing::two_cpus()) return;
  tbb::task_arena a1(1), a2(2);
  a1.execute([&] { kernel::gemm(false, true, M, N, K, A.data(), K, B.data(), K, one.data(), N, false); });
  a2.execute([&] { kernel::gemm(false, true, M, N, K, A.data(), K, B.data(), K, two.data(), N, false); });
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
}

namespace {
// fp32 -> bf16 -> fp32, round to nearest even (finite inputs).
float round_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}
}  // namespace

TEST_CASE("bf16 precision rounds the operands to bfloat16 and accumulates in fp32", "[ops][gemm][bf16]") {
  if (!ctgrad::testing::bf16_gemm()) return;
  struct S { std::int64_t M, N, K; };
  for (S s : {S{1, 1, 1}, S{7, 5, 3}, S{33, 17, 65}, S{600, 40, 50}, S{40, 700, 60}, S{513, 257, 129}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool acc : {false, true}) {
          auto A = randn(std::size_t(s.M * s.K), 1), B = randn(std::size_t(s.K * s.N), 2), C = randn(std::size_t(s.M * s.N), 3);
          const std::int64_t lda = ta ? s.M : s.K, ldb = tb ? s.K : s.N;
          // The exact product of the rounded operands, and of the fp32 ones.
          std::vector<double> rounded(C.begin(), C.end()), exact(C.begin(), C.end());
          for (std::int64_t i = 0; i < s.M; ++i)
            for (std::int64_t j = 0; j < s.N; ++j) {
              double r = acc ? rounded[std::size_t(i * s.N + j)] : 0.0, e = acc ? exact[std::size_t(i * s.N + j)] : 0.0;
              for (std::int64_t k = 0; k < s.K; ++k) {
                const float a = ta ? A[std::size_t(k * lda + i)] : A[std::size_t(i * lda + k)];
                const float b = tb ? B[std::size_t(j * ldb + k)] : B[std::size_t(k * ldb + j)];
                r += double(round_bf16(a)) * double(round_bf16(b));
                e += double(a) * double(b);
              }
              rounded[std::size_t(i * s.N + j)] = r, exact[std::size_t(i * s.N + j)] = e;
            }
          {
            ctgrad::testing::ScopedPrecision bf16(kernel::Precision::bf16);
            kernel::gemm(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), s.N, acc);
          }
          double to_rounded = 0, to_exact = 0;
          for (std::size_t e = 0; e < C.size(); ++e)
            to_rounded = std::max(to_rounded, std::abs(C[e] - rounded[e])), to_exact = std::max(to_exact, std::abs(C[e] - exact[e]));
          INFO("M" << s.M << " N" << s.N << " K" << s.K << " ta" << ta << " tb" << tb << " acc" << acc);
          if (2 * s.M * s.N * s.K < kernel::kBf16MinFlops) {  // a small product stays fp32
            CHECK(to_exact < 1e-4 * std::sqrt(double(s.K)) + 1e-5);
            continue;
          }
          CHECK(to_rounded < 1e-4 * std::sqrt(double(s.K)) + 1e-5);  // fp32 accumulation of the bf16 operands
          CHECK(to_exact < 2e-2 * std::sqrt(double(s.K)) + 1e-2);    // and within bf16's rounding of the fp32 product
          CHECK(to_exact > 1e-4 * std::sqrt(double(s.K)));           // bf16 did run: fp32 would be this close
        }
}

TEST_CASE("bf16 gemm gives the same bits on 1 and 2 threads", "[ops][gemm][bf16][determinism]") {
  if (!ctgrad::testing::bf16_gemm() || !ctgrad::testing::two_cpus()) return;
  const std::int64_t M = 1100, N = 300, K = 257;
  auto A = randn(std::size_t(M * K), 4), B = randn(std::size_t(K * N), 5);
  ctgrad::testing::ScopedPrecision bf16(kernel::Precision::bf16);
  const auto [one, two] = on_1_and_2_threads(std::vector<float>(std::size_t(M * N)), [&](float* c) {
    kernel::gemm(false, true, M, N, K, A.data(), K, B.data(), K, c, N, false);
  });
  CHECK(same_bits(one, two));
}

TEST_CASE("bf16 precision on a CPU without AVX512-BF16 is refused by name and GEMMs stay fp32", "[ops][gemm][bf16]") {
  cpu::Features old = cpu::features();
  old.avx512bf16 = false;
  const std::string why = kernel::set_gemm_precision(kernel::Precision::bf16, old);
  CHECK_THAT(why, Catch::Matchers::Contains("needs a CPU with AVX512-BF16") && Catch::Matchers::Contains("matmuls stay fp32"));
  CHECK(kernel::gemm_precision() == kernel::Precision::fp32);
  CHECK(kernel::set_gemm_precision(kernel::Precision::fp32).empty());
}

TEST_CASE("a GEMM split for a many-core host (a grid of blocks) is right and the same on 1 and 2 threads", "[ops][gemm][determinism]") {
  // As on a host of 16 CPUs: 1030 x 600 splits into 4 x 2 blocks.
  ctgrad::testing::ScopedGemmBlocks blocks(16);
  const std::int64_t M = 1030, N = 600, K = 70;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto A = randn(std::size_t(M * K), 8), B = randn(std::size_t(K * N), 9);
      const std::int64_t lda = ta ? M : K, ldb = tb ? K : N;
      const auto [one, two] = on_1_and_2_threads(std::vector<float>(std::size_t(M * N)), [&](float* c) {
        kernel::gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, c, N, false);
      });
      if (ctgrad::testing::two_cpus()) CHECK(same_bits(one, two));
      double worst = 0;
      for (std::int64_t i = 0; i < M; i += 7)
        for (std::int64_t j = 0; j < N; ++j)
          worst = std::max(worst, std::abs(one[std::size_t(i * N + j)] - reference_entry(A, lda, ta, B, ldb, tb, i, j, K)));
      INFO("ta" << ta << " tb" << tb);
      CHECK(worst < 1e-4 * std::sqrt(double(K)) + 1e-5);
    }
}

TEST_CASE("a GEMM too narrow to split by rows or columns splits K: right, accumulating, the same on 1 and 2 threads", "[ops][gemm][determinism]") {
  // A small layer's weight gradient: C is 200 x 130 (no side of 2 x 256), K = 3000 tokens: 4 blocks of K.
  ctgrad::testing::ScopedGemmBlocks blocks(4);
  const std::int64_t M = 200, N = 130, K = 3000;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool acc : {false, true}) {
        auto A = randn(std::size_t(M * K), 10), B = randn(std::size_t(K * N), 11), C0 = randn(std::size_t(M * (N + 3)), 12);
        const std::int64_t lda = ta ? M : K, ldb = tb ? K : N, ldc = N + 3;  // C strided: the partials are added row by row
        const auto [one, two] = on_1_and_2_threads(C0, [&](float* c) { kernel::gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, c, ldc, acc); });
        if (ctgrad::testing::two_cpus()) CHECK(same_bits(one, two));
        double worst = 0;
        for (std::int64_t i = 0; i < M; i += 3)
          for (std::int64_t j = 0; j < N; ++j) {
            const double want = (acc ? double(C0[std::size_t(i * ldc + j)]) : 0.0) + reference_entry(A, lda, ta, B, ldb, tb, i, j, K);
            worst = std::max(worst, std::abs(one[std::size_t(i * ldc + j)] - want));
          }
        bool padding_kept = true;  // the 3 columns past N are not C's
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t j = N; j < ldc; ++j) padding_kept = padding_kept && one[std::size_t(i * ldc + j)] == C0[std::size_t(i * ldc + j)];
        INFO("ta" << ta << " tb" << tb << " acc" << acc);
        CHECK(worst < 1e-4 * std::sqrt(double(K)) + 1e-5);
        CHECK(padding_kept);
      }
}

TEST_CASE("bf16 gemm split along K gives the same bits on 1 and 2 threads", "[ops][gemm][bf16][determinism]") {
  if (!ctgrad::testing::bf16_gemm() || !ctgrad::testing::two_cpus()) return;
  ctgrad::testing::ScopedGemmBlocks blocks(2);
  const std::int64_t M = 130, N = 200, K = 2500;
  auto A = randn(std::size_t(M * K), 13), B = randn(std::size_t(K * N), 14);
  ctgrad::testing::ScopedPrecision bf16(kernel::Precision::bf16);
  const auto [one, two] = on_1_and_2_threads(std::vector<float>(std::size_t(M * N)), [&](float* c) {
    kernel::gemm(true, false, M, N, K, A.data(), M, B.data(), N, c, N, false);
  });
  CHECK(same_bits(one, two));
  double worst = 0;
  for (std::int64_t i = 0; i < M; i += 5)
    for (std::int64_t j = 0; j < N; j += 3) worst = std::max(worst, std::abs(one[std::size_t(i * N + j)] - reference_entry(A, M, true, B, N, false, i, j, K)));
  CHECK(worst < 2e-2 * std::sqrt(double(K)) + 1e-2);  // bf16 operands, fp32 accumulation
}

namespace {
// Over every third row of C (ldc wide): the largest |C - reference|, the reference in double of
// op(A) op(B) (+ C0 when accumulating) from the operands passed through `in` (as they are, or
// rounded to bf16); and whether C's padding columns kept C0's values.
template <class In>
std::pair<double, bool> against_reference(const std::vector<float>& C, const std::vector<float>& C0, const std::vector<float>& A,
                                          std::int64_t lda, bool ta, const std::vector<float>& B, std::int64_t ldb, bool tb,
                                          std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t ldc, bool acc, In in) {
  double worst = 0;
  bool padding_kept = true;
  for (std::int64_t i = 0; i < M; i += 3)
    for (std::int64_t j = 0; j < ldc; ++j) {
      const std::size_t e = std::size_t(i * ldc + j);
      if (j >= N) {
        padding_kept = padding_kept && C[e] == C0[e];
        continue;
      }
      double want = acc ? double(C0[e]) : 0.0;
      for (std::int64_t k = 0; k < K; ++k)
        want += double(in(ta ? A[std::size_t(k * lda + i)] : A[std::size_t(i * lda + k)])) *
                double(in(tb ? B[std::size_t(j * ldb + k)] : B[std::size_t(k * ldb + j)]));
      worst = std::max(worst, std::abs(C[e] - want));
    }
  return {worst, padding_kept};
}
// Sets the bf16 route until the end of the scope, then back to automatic.
struct ScopedRoute {
  explicit ScopedRoute(kernel::Bf16Kernel k) { kernel::set_bf16_kernel(k); }
  ~ScopedRoute() { kernel::set_bf16_kernel(kernel::Bf16Kernel::automatic); }
};
// Sets the fp32 route until the end of the scope, then back to automatic.
struct ScopedFp32Route {
  explicit ScopedFp32Route(kernel::Fp32Kernel k) { kernel::set_fp32_kernel(k); }
  ~ScopedFp32Route() { kernel::set_fp32_kernel(kernel::Fp32Kernel::automatic); }
};
// At 4 blocks: 2 blocks of rows, of columns, of K, a 2 x 2 grid, each also with blocks of unequal size.
struct SplitShape {
  std::int64_t M, N, K;
};
constexpr SplitShape kSplitShapes[] = {{600, 40, 90}, {601, 40, 90}, {40, 700, 80}, {40, 701, 80},
                                       {60, 50, 1200}, {61, 50, 1201}, {520, 530, 16}, {521, 531, 16}};
}  // namespace

TEST_CASE("bf16 gemm through oneDNN matmul primitives or its BLAS-like call is right for every form and split and a strided C", "[ops][gemm][bf16]") {
  if (!ctgrad::testing::bf16_gemm()) return;
  // With up to 4 blocks: 2 blocks of rows (600 x 40), of columns (40 x 700), of K (60 x 50, K =
  // 1200), a 2 x 2 grid (520 x 530), each also with blocks of unequal size (one more row, column,
  // K); C strided (3 columns of padding), so the split-N and strided blocks take the BLAS-like
  // call even among primitives.
  ctgrad::testing::ScopedGemmBlocks blocks(4);
  for (const kernel::Bf16Kernel route : {kernel::Bf16Kernel::primitive, kernel::Bf16Kernel::call}) {
    ScopedRoute scoped(route);
    ctgrad::testing::ScopedPrecision bf16(kernel::Precision::bf16);
    if (route == kernel::Bf16Kernel::primitive)  // built here, not fallen back from
      CHECK_THAT(kernel::bf16_kernel(), Catch::Matchers::Contains("matmul primitives (") && !Catch::Matchers::Contains("none built") &&
                                          !Catch::Matchers::Contains(" else "));
    else
      CHECK(kernel::bf16_kernel() == "oneDNN's dnnl_gemm_bf16bf16f32");
    for (const SplitShape s : kSplitShapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (bool acc : {false, true})
            for (std::int64_t pad : {0, 3}) {
              const std::int64_t lda = ta ? s.M : s.K, ldb = tb ? s.K : s.N, ldc = s.N + pad;
              auto A = randn(std::size_t(s.M * s.K), 21), B = randn(std::size_t(s.K * s.N), 22), C0 = randn(std::size_t(s.M * ldc), 23);
              const std::int64_t runs = kernel::bf16_primitive_runs();
              const auto [one, two] = on_1_and_2_threads(C0, [&](float* c) { kernel::gemm(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, c, ldc, acc); });
              // Dense C blocks (no column split, no padding) ran through primitives, when forced.
              if (route == kernel::Bf16Kernel::primitive && pad == 0 && s.N < 512) CHECK(kernel::bf16_primitive_runs() > runs);
              if (route == kernel::Bf16Kernel::call) CHECK(kernel::bf16_primitive_runs() == runs);
              if (ctgrad::testing::two_cpus()) CHECK(same_bits(one, two));
              const auto [to_rounded, padding_kept] =
                  against_reference(one, C0, A, lda, ta, B, ldb, tb, s.M, s.N, s.K, ldc, acc, round_bf16);
              INFO("route " << int(route) << " M" << s.M << " N" << s.N << " K" << s.K << " ta" << ta << " tb" << tb << " acc" << acc << " pad" << pad);
              CHECK(to_rounded < 1e-4 * std::sqrt(double(s.K)) + 1e-5);  // fp32 accumulation of the bf16 operands
              CHECK(padding_kept);
            }
  }
}

TEST_CASE("fp32 gemm through oneDNN matmul primitives, dnnl_sgemm or OpenBLAS is right for every form and split and a strided C", "[ops][gemm]") {
  // The splits of the bf16 test above; a block takes a primitive only when its operands are dense
  // (here: rows split or none, op(A) not transposed, nothing padded), else OpenBLAS, even when
  // forced; dnnl_sgemm, forced, takes every block (strided ones too).
  ctgrad::testing::ScopedGemmBlocks blocks(4);
  for (const kernel::Fp32Kernel route : {kernel::Fp32Kernel::primitive, kernel::Fp32Kernel::openblas, kernel::Fp32Kernel::call}) {
    ScopedFp32Route scoped(route);
    const bool primitives = route == kernel::Fp32Kernel::primitive && kernel::fp32_kernel().find("matmul primitives (") != std::string::npos;
    const bool calls = route == kernel::Fp32Kernel::call && kernel::fp32_kernel() == "oneDNN's dnnl_sgemm for every block";
    if (route == kernel::Fp32Kernel::primitive && !primitives) WARN("no fp32 matmul primitives here: " << kernel::fp32_kernel());
    if (route == kernel::Fp32Kernel::call && !calls) WARN("no dnnl_sgemm here: " << kernel::fp32_kernel());
    if (primitives) CHECK_THAT(kernel::fp32_kernel(), !Catch::Matchers::Contains("none built"));
    if (route == kernel::Fp32Kernel::openblas) CHECK(kernel::fp32_kernel() == "OpenBLAS");
    for (const SplitShape s : kSplitShapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (bool acc : {false, true})
            for (std::int64_t pad : {0, 3}) {
              // pad: every operand strided (3 more elements a row), so no block is dense
              const std::int64_t lda = (ta ? s.M : s.K) + pad, ldb = (tb ? s.K : s.N) + pad, ldc = s.N + pad;
              auto A = randn(std::size_t((ta ? s.K : s.M) * lda), 41), B = randn(std::size_t((tb ? s.N : s.K) * ldb), 42);
              auto C0 = randn(std::size_t(s.M * ldc), 43);
              const std::int64_t runs = kernel::fp32_primitive_runs(), call_runs = kernel::fp32_call_runs();
              const auto [one, two] = on_1_and_2_threads(C0, [&](float* c) { kernel::gemm(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, c, ldc, acc); });
              if (primitives && pad == 0 && !ta && s.N < 512 && s.K < 1000) CHECK(kernel::fp32_primitive_runs() > runs);
              if (!primitives || pad > 0) CHECK(kernel::fp32_primitive_runs() == runs);  // strided: OpenBLAS
              CHECK((kernel::fp32_call_runs() > call_runs) == calls);
              if (ctgrad::testing::two_cpus()) CHECK(same_bits(one, two));
              const auto [worst, padding_kept] =
                  against_reference(one, C0, A, lda, ta, B, ldb, tb, s.M, s.N, s.K, ldc, acc, [](float x) { return x; });
              INFO("route " << int(route) << " M" << s.M << " N" << s.N << " K" << s.K << " ta" << ta << " tb" << tb << " acc" << acc << " pad" << pad);
              CHECK(worst < 1e-4 * std::sqrt(double(s.K)) + 1e-5);
              CHECK(padding_kept);
            }
  }
}

TEST_CASE("automatic fp32 route: dnnl_sgemm for blocks of N >= 513 without a bias by form, primitives for op(A) not transposed, and for op(A) transposed only with K >= 8 max(M, N)", "[ops][gemm]") {
  // The rule of kernel::gemm's automatic route on hosts with oneDNN's AVX-512 brgemm kernels (a
  // weight gradient of long K, as ViT's, through a primitive; of short K, through OpenBLAS; a
  // product of blocks wider than 512 columns through dnnl_sgemm, unless a bias goes into a
  // primitive's epilogue); on other hosts every product stays on OpenBLAS. Each product is also
  // checked against a double reference.
  if (std::getenv("CTGRAD_FP32_GEMM")) {  // it overrides automatic
    WARN("skipped: CTGRAD_FP32_GEMM is set");
    return;
  }
  ctgrad::testing::ScopedGemmBlocks blocks(2);
  ScopedFp32Route scoped(kernel::Fp32Kernel::automatic);
  const bool brgemm = kernel::fp32_kernel().find("matmul primitives (") != std::string::npos;
  if (!brgemm) WARN("no AVX-512 brgemm primitives here, every product on OpenBLAS: " << kernel::fp32_kernel());
  struct Case {
    bool ta;
    std::int64_t M, N, K;  // none splits M or N at 2 blocks (dense blocks)
    bool primitive;
    bool tb = false, call = false;
  };
  // long K (split in 2 blocks of 2,048 >= 8 x 128); blocks of exactly 8 x 256; of one less
  // (2,047); a product whose K (3,072) meets the rule but whose blocks (1,536) do not: the rule is
  // per block; short K (384 < 8 x 256, not split); the same short product with op(A) not
  // transposed; one under 16 MFLOP
  const Case cases[] = {{true, 128, 64, 4096, true},   {true, 256, 64, 4096, true},    {true, 256, 64, 4094, false},
                        {true, 256, 64, 3072, false},  {true, 256, 200, 384, false},   {false, 256, 200, 384, true},
                        {false, 64, 64, 256, false},
                        // blocks 640 wide: NT, dnnl_sgemm; NN, the primitive (a small B), but
                        // dnnl_sgemm from K = 1024 on; 512 wide: the primitive; blocks under 16
                        // MFLOP: OpenBLAS
                        {false, 1024, 640, 64, false, true, true},  {false, 1024, 640, 64, true},
                        {false, 600, 520, 1024, false, false, true}, {false, 600, 520, 1023, true},
                        {false, 1024, 512, 64, true},  {false, 700, 640, 16, false},
                        // op(A) transposed, 640 wide: dnnl_sgemm from blocks of 512 rows on
                        {true, 1024, 640, 64, false, false, true}, {true, 1020, 640, 64, false},
                        // NT at the width boundary: 513 columns dnnl_sgemm, 512 the primitive
                        {false, 1024, 513, 64, false, true, true}, {false, 1024, 512, 64, true, true}};
  for (const Case& c : cases) {
    const std::int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N, ldc = c.N;
    auto A = randn(std::size_t(c.M * c.K), 51), B = randn(std::size_t(c.K * c.N), 52), C0 = randn(std::size_t(c.M * c.N), 53);
    auto C = C0;
    const std::int64_t runs = kernel::fp32_primitive_runs(), calls = kernel::fp32_call_runs();
    kernel::gemm(c.ta, c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, C.data(), ldc, false);
    INFO("ta" << c.ta << " tb" << c.tb << " M" << c.M << " N" << c.N << " K" << c.K);
    CHECK((kernel::fp32_primitive_runs() > runs) == (brgemm && c.primitive));
    CHECK((kernel::fp32_call_runs() > calls) == (brgemm && c.call));
    const double worst = against_reference(C, C0, A, lda, c.ta, B, ldb, c.tb, c.M, c.N, c.K, ldc, false, [](float x) { return x; }).first;
    CHECK(worst < 1e-4 * std::sqrt(double(c.K)) + 1e-5);  // (C is dense: no padding to check)
  }
  // NN with K under 1024 but a large B, one block: N K of 2,100 x 1,000 >= 2^21 takes dnnl_sgemm,
  // 2,100 x 998 (2^21 - 1,352) the primitive.
  {
    ctgrad::testing::ScopedGemmBlocks one(1);
    for (const std::int64_t K : {1000, 998}) {
      const std::int64_t M = 64, N = 2100;
      auto A = randn(std::size_t(M * K), 58), B = randn(std::size_t(K * N), 59), C0 = randn(std::size_t(M * N), 60);
      auto C = C0;
      const std::int64_t prims = kernel::fp32_primitive_runs(), calls = kernel::fp32_call_runs();
      kernel::gemm(false, false, M, N, K, A.data(), K, B.data(), N, C.data(), N, false);
      INFO("NN 64 x 2100 x " << K);
      CHECK((kernel::fp32_call_runs() > calls) == (brgemm && K == 1000));
      CHECK((kernel::fp32_primitive_runs() > prims) == (brgemm && K == 998));
      const double worst = against_reference(C, C0, A, K, false, B, N, false, M, N, K, N, false, [](float x) { return x; }).first;
      CHECK(worst < 1e-4 * std::sqrt(double(K)) + 1e-5);
    }
  }
  // With a bias (a linear's forward), the 640-wide NT blocks keep the primitive and its epilogue.
  const std::int64_t M = 1024, N = 640, K = 64;
  auto X = randn(std::size_t(M * K), 54), W = randn(std::size_t(N * K), 55), bias = randn(std::size_t(N), 56), Y = randn(std::size_t(M * N), 57);
  const std::int64_t runs = kernel::fp32_primitive_runs(), calls = kernel::fp32_call_runs();
  kernel::gemm_bias(false, true, M, N, K, X.data(), K, W.data(), K, bias.data(), Y.data(), N);
  CHECK((kernel::fp32_primitive_runs() > runs) == brgemm);
  CHECK(kernel::fp32_call_runs() == calls);
  double worst = 0;
  for (std::int64_t i = 0; i < M; i += 7)
    for (std::int64_t j = 0; j < N; ++j) {
      double want = bias[std::size_t(j)];
      for (std::int64_t k = 0; k < K; ++k) want += double(X[std::size_t(i * K + k)]) * double(W[std::size_t(j * K + k)]);
      worst = std::max(worst, std::abs(Y[std::size_t(i * N + j)] - want));
    }
  CHECK(worst < 1e-4 * std::sqrt(double(K)) + 1e-5);
}

TEST_CASE("gemm_bias adds the bias once to every row on every fp32 and bf16 route for every form and split", "[ops][gemm][bf16]") {
  // Splits as in the tests above (rows, columns, K, a 2 x 2 grid at 4 blocks); a K split must add
  // the bias in its first K block only.
  ctgrad::testing::ScopedGemmBlocks blocks(4);
  const bool bf16 = ctgrad::testing::bf16_gemm();
  // fp32 through OpenBLAS, fp32 through primitives, bf16 through primitives, bf16 through the call,
  // fp32 through dnnl_sgemm (the bias written first, then accumulated onto)
  for (int route = 0; route < 5; ++route) {
    if (!bf16 && (route == 2 || route == 3)) continue;
    ScopedFp32Route fp32_route(route == 1 ? kernel::Fp32Kernel::primitive : route == 4 ? kernel::Fp32Kernel::call : kernel::Fp32Kernel::openblas);
    ScopedRoute scoped(route == 3 ? kernel::Bf16Kernel::call : kernel::Bf16Kernel::primitive);
    std::optional<ctgrad::testing::ScopedPrecision> precision;
    const bool in_bf16 = route == 2 || route == 3;
    if (in_bf16) precision.emplace(kernel::Precision::bf16);
    const auto in_precision = [&](float x) { return in_bf16 ? round_bf16(x) : x; };
    const std::int64_t fp32_runs = kernel::fp32_primitive_runs(), fp32_calls = kernel::fp32_call_runs();
    for (const SplitShape s : kSplitShapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (std::int64_t pad : {0, 3}) {
            const std::int64_t lda = ta ? s.M : s.K, ldb = tb ? s.K : s.N, ldc = s.N + pad;
            auto A = randn(std::size_t(s.M * s.K), 31), B = randn(std::size_t(s.K * s.N), 32), bias = randn(std::size_t(s.N), 33);
            auto C = randn(std::size_t(s.M * ldc), 34);  // overwritten, but for the padding
            const auto C0 = C;
            kernel::gemm_bias(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, bias.data(), C.data(), ldc);
            double worst = 0;
            bool padding_kept = true;
            for (std::int64_t i = 0; i < s.M; i += 3)
              for (std::int64_t j = 0; j < ldc; ++j) {
                const std::size_t e = std::size_t(i * ldc + j);
                if (j >= s.N) {
                  padding_kept = padding_kept && C[e] == C0[e];
                  continue;
                }
                double want = bias[std::size_t(j)];
                for (std::int64_t k = 0; k < s.K; ++k)
                  want += double(in_precision(ta ? A[std::size_t(k * lda + i)] : A[std::size_t(i * lda + k)])) *
                          double(in_precision(tb ? B[std::size_t(j * ldb + k)] : B[std::size_t(k * ldb + j)]));
                worst = std::max(worst, std::abs(C[e] - want));
              }
            INFO("route " << route << " M" << s.M << " N" << s.N << " K" << s.K << " ta" << ta << " tb" << tb << " pad" << pad);
            CHECK(worst < 1e-4 * std::sqrt(double(s.K)) + 1e-5);
            CHECK(padding_kept);
          }
    if (route == 1 && kernel::fp32_kernel().find("matmul primitives (") != std::string::npos) CHECK(kernel::fp32_primitive_runs() > fp32_runs);
    if (route != 1) CHECK(kernel::fp32_primitive_runs() == fp32_runs);
    if (route == 4 && kernel::fp32_kernel() == "oneDNN's dnnl_sgemm for every block") CHECK(kernel::fp32_call_runs() > fp32_calls);
    if (route != 4) CHECK(kernel::fp32_call_runs() == fp32_calls);
  }
}

TEST_CASE("a Bf16OperandReuse scope converts an operand shared by two bf16 GEMMs once and changes no bit", "[ops][gemm][bf16]") {
  if (!ctgrad::testing::bf16_gemm()) return;
  // A linear's VJP at 2 blocks: dX = G W splits G's rows in 2, dW = G^T X splits K (G's rows) in
  // 2: the same block layout of G, so the second product takes the first one's copy.
  ctgrad::testing::ScopedGemmBlocks blocks(2);
  const std::int64_t rows = 1200, out = 100, in = 90;
  auto G = randn(std::size_t(rows * out), 41), W = randn(std::size_t(out * in), 42), X = randn(std::size_t(rows * in), 43);
  ctgrad::testing::ScopedPrecision bf16(kernel::Precision::bf16);
  auto vjp = [&](bool reuse, std::vector<float>& dx, std::vector<float>& dw) {
    std::optional<kernel::Bf16OperandReuse> scope;
    if (reuse) scope.emplace();
    const std::int64_t before = kernel::bf16_conversions();
    kernel::gemm(false, false, rows, in, out, G.data(), out, W.data(), in, dx.data(), in, false);
    kernel::gemm(true, false, out, in, rows, G.data(), out, X.data(), in, dw.data(), in, false);
    return kernel::bf16_conversions() - before;
  };
  std::vector<float> dx1(std::size_t(rows * in)), dw1(std::size_t(out * in)), dx2 = dx1, dw2 = dw1;
  CHECK(vjp(false, dx1, dw1) == 4);
  CHECK(vjp(true, dx2, dw2) == 3);
  CHECK(same_bits(dx1, dx2));
  CHECK(same_bits(dw1, dw2));
  // Out of the scope nothing is kept: G is converted again.
  std::vector<float> dx3 = dx1, dw3 = dw1;
  CHECK(vjp(false, dx3, dw3) == 4);
}

TEST_CASE("past the kept primitives a bf16 block shape builds its primitive per call with the same bits", "[ops][gemm][bf16][determinism]") {
  if (!ctgrad::testing::bf16_gemm()) return;
  struct Restore {
    ~Restore() {
      kernel::set_bf16_primitives_kept(4096);
      kernel::set_bf16_kernel(kernel::Bf16Kernel::automatic);
    }
  } restore;
  kernel::set_bf16_kernel(kernel::Bf16Kernel::primitive);
  ctgrad::testing::ScopedPrecision bf16(kernel::Precision::bf16);
  ctgrad::testing::ScopedGemmBlocks blocks(2);
  const std::int64_t M = 613, N = 47, K = 97;  // shapes no other test uses: 2 row blocks of 306 and 307
  auto A = randn(std::size_t(M * K), 51), B = randn(std::size_t(K * N), 52);
  auto run = [&] {
    return on_1_and_2_threads(std::vector<float>(std::size_t(M * N)), [&](float* c) {
      kernel::gemm(false, true, M, N, K, A.data(), K, B.data(), K, c, N, false);
    });
  };
  kernel::set_bf16_primitives_kept(0);  // none more kept: built on every call
  const std::int64_t runs = kernel::bf16_primitive_runs();
  const auto [once1, once2] = run();
  CHECK(kernel::bf16_primitive_runs() - runs == 4);  // 2 blocks, twice: still primitives
  kernel::set_bf16_primitives_kept(4096);
  const auto [kept1, kept2] = run();
  CHECK(same_bits(once1, kept1));
  if (ctgrad::testing::two_cpus()) CHECK(same_bits(once1, once2));
  CHECK(same_bits(kept1, kept2));
}
