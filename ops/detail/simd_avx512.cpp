// The SIMD kernels compiled for avx512 (this file alone gets the instruction-set flags).
#include <ctgrad/ops/detail/simd_kernels.hpp>

namespace ctgrad::simd {
Table table_avx512() { return make_table<xsimd::avx512bw>("avx512"); }
}  // namespace ctgrad::simd
