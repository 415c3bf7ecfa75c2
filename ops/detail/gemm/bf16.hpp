// Mixed precision: C (+)= op(A) op(B) with both operands rounded to bfloat16 and fp32
// accumulation, through oneDNN (its BLAS-like call, or matmul primitives where the rules take
// them), under the same shape-only split as fp32.
#pragma once
#include <cstdint>

namespace ctgrad::kernel::gemm_impl {

// With `bias` (then not accumulating), C = op(A) op(B) + bias on every row, the bias added by a
// primitive's epilogue or, for a block that takes the BLAS-like call, written into the block
// before the product is accumulated onto it.
void gemm_bf16(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda, const float* B,
               std::int64_t ldb, const float* bias, float* C, std::int64_t ldc, bool acc);

}  // namespace ctgrad::kernel::gemm_impl
