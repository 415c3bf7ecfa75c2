// The SIMD kernels compiled for avx2 (this file alone gets the instruction-set flags).
#define CTGRAD_SIMD_ISA isa_avx2
#include <ctgrad/ops/detail/simd_kernels.hpp>

namespace ctgrad::simd {
Table table_avx2() { return isa_avx2::make_table<xsimd::fma3<xsimd::avx2>>("avx2"); }
}  // namespace ctgrad::simd
