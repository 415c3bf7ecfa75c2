// Adam's kernel compiled for sse2 (this file alone gets the instruction-set flags).
#define CTGRAD_SIMD_ISA isa_sse2
#include <ctgrad/optim/detail/adam_kernel.hpp>

namespace ctgrad::optim::detail {
AdamKernels adam_sse2() { return isa_sse2::kernels<xsimd::sse2>(); }
}  // namespace ctgrad::optim::detail
