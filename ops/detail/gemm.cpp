// The GEMM entry points (gemm.hpp). One file per concern in gemm/: openblas (the loader and its
// calls), blocks (the shape-only split), onednn (the loader and the primitive cache), routes (which
// kernel takes a block, and the environment's say), bf16 (operand conversion and reuse).
#include <ctgrad/ops/detail/gemm.hpp>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include <ctgrad/ops/detail/gemm/bf16.hpp>
#include <ctgrad/ops/detail/gemm/blocks.hpp>
#include <ctgrad/ops/detail/gemm/openblas.hpp>
#include <ctgrad/ops/detail/gemm/routes.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

namespace ctgrad::kernel {
namespace {
using namespace gemm_impl;

// Reference kernel: C[i,j] (+)= sum_k A(i,k) B(k,j) through strides; rows in parallel.
template <class T>
void reference(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda,
               const T* B, std::int64_t ldb, T* C, std::int64_t ldc, bool acc) {
  const std::int64_t ar = ta ? 1 : lda, ac = ta ? lda : 1, br = tb ? 1 : ldb, bc = tb ? ldb : 1;
  parallel(M, std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(1, N * K)), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      T* c = C + i * ldc;
      if (!acc) std::fill(c, c + N, T(0));
      for (std::int64_t k = 0; k < K; ++k) {
        const T a = A[i * ar + k * ac];
        for (std::int64_t j = 0; j < N; ++j) c[j] += a * B[k * br + j * bc];
      }
    }
  });
}

}  // namespace

template <class T>
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda, const T* B,
          std::int64_t ldb, T* C, std::int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    if (bf16_enabled() && 2 * M * N * K >= kBf16MinFlops) {
      gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, nullptr, C, ldc, accumulate);
      return;
    }
  if (!blas().sgemm) {
    reference(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    return;
  }
  split_blocks(choose_split(M, N, K), M, N, K, C, ldc, accumulate,
               [&](std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1, std::int64_t k0, std::int64_t k1, T* c,
                   std::int64_t ldc_block, bool acc_block) {
                 const T* a = ta ? A + k0 * lda + m0 : A + m0 * lda + k0;
                 const T* b = tb ? B + n0 * ldb + k0 : B + k0 * ldb + n0;
                 if constexpr (std::is_same_v<T, float>)
                   if (fp32_block_call(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, c, ldc_block, acc_block) ||
                       fp32_block_primitive(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, nullptr, c, ldc_block, acc_block))
                     return;
                 call(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, c, ldc_block, acc_block);
               });
}

template <class T>
void gemm_bias(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda, const T* B,
               std::int64_t ldb, const T* bias, T* C, std::int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (bf16_enabled() && K > 0 && 2 * M * N * K >= kBf16MinFlops) {
      gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc, false);
      return;
    }
  if constexpr (std::is_same_v<T, float>)
    if (K > 0 && blas().sgemm && fp32_primitive_for(ta, M, N, K)) {  // the bias in a primitive's epilogue, block by block
      split_blocks(choose_split(M, N, K), M, N, K, C, ldc, false,
                   [&](std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1, std::int64_t k0, std::int64_t k1, T* c,
                       std::int64_t ldc_block, bool acc_block) {
                     const T* a = ta ? A + k0 * lda + m0 : A + m0 * lda + k0;
                     const T* b = tb ? B + n0 * ldb + k0 : B + k0 * ldb + n0;
                     const T* block_bias = k0 == 0 ? bias + n0 : nullptr;  // once: not into K blocks' partials
                     if (fp32_block_primitive(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, block_bias, c, ldc_block, acc_block))
                       return;
                     acc_block = bias_rows_first(block_bias, c, ldc_block, m1 - m0, n1 - n0, acc_block);
                     call(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, c, ldc_block, acc_block);
                   });
      return;
    }
  parallel(M, std::max<std::int64_t>(1, 16384 / N), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) std::memcpy(C + r * ldc, bias, std::size_t(N) * sizeof(T));
  });
  gemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, true);
}

template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,
                          std::int64_t, float*, std::int64_t, bool);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t,
                           const double*, std::int64_t, double*, std::int64_t, bool);
template void gemm_bias<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,
                               std::int64_t, const float*, float*, std::int64_t);
template void gemm_bias<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t,
                                const double*, std::int64_t, const double*, double*, std::int64_t);

}  // namespace ctgrad::kernel
