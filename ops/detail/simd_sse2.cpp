// The SIMD kernels compiled for sse2 (this file alone gets the instruction-set flags).
#include <ctgrad/ops/detail/simd_kernels.hpp>

namespace ctgrad::simd {
Table table_sse2() { return make_table<xsimd::sse2>("sse2"); }
}  // namespace ctgrad::simd
