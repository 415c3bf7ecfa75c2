// The SIMD kernels compiled for sse2 (this file alone gets the instruction-set flags).
#define CTGRAD_SIMD_ISA isa_sse2
#include <ctgrad/ops/detail/simd_kernels.hpp>

namespace ctgrad::simd {
Table table_sse2() { return isa_sse2::make_table<xsimd::sse2>("sse2"); }
}  // namespace ctgrad::simd
