// The SIMD kernels compiled for avx512 (this file alone gets the instruction-set flags).
#define CTGRAD_SIMD_ISA isa_avx512
#include <ctgrad/ops/detail/simd_kernels.hpp>

namespace ctgrad::simd {
Table table_avx512() { return isa_avx512::make_table<xsimd::avx512bw>("avx512"); }
}  // namespace ctgrad::simd
