// Which kernel runs a GEMM block: OpenBLAS, a oneDNN matmul primitive or oneDNN's BLAS-like call,
// by precision, form (which operands are transposed) and shape, never by thread or timing, so a
// block's bits depend on its shape alone. The rules and the measurements behind them:
// gemm.hpp (Fp32Kernel, Bf16Kernel) and docs/performance.md.
#pragma once
#include <cstdint>

namespace ctgrad::kernel::gemm_impl {

bool bf16_enabled();  // set_gemm_precision(bf16) took effect
int bf16_route();     // a Bf16Kernel: the setter's, else CTGRAD_BF16_GEMM's, else automatic
bool bf16_primitive_for(bool trans_a, bool trans_b, std::int64_t k);
int fp32_route();     // an Fp32Kernel, likewise
bool fp32_primitive_for(bool trans_a, std::int64_t m, std::int64_t n, std::int64_t k);

// Run an fp32 block through dnnl_sgemm, or through a kept primitive (with `bias` in its epilogue),
// when the rules take it; false when the caller must run it through OpenBLAS.
bool fp32_block_call(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                     const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool acc);
bool fp32_block_primitive(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                          const float* b, std::int64_t ldb, const float* bias, float* c, std::int64_t ldc, bool acc);

}  // namespace ctgrad::kernel::gemm_impl
