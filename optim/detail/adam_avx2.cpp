// Adam's kernel compiled for avx2 (this file alone gets the instruction-set flags).
#define CTGRAD_SIMD_ISA isa_avx2
#include <ctgrad/optim/detail/adam_kernel.hpp>

namespace ctgrad::optim::detail {
AdamKernels adam_avx2() { return isa_avx2::kernels<xsimd::fma3<xsimd::avx2>>(); }
}  // namespace ctgrad::optim::detail
