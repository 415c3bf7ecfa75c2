// Adam's kernel compiled for avx512 (this file alone gets the instruction-set flags).
#define CTGRAD_SIMD_ISA isa_avx512
#include <ctgrad/optim/detail/adam_kernel.hpp>

namespace ctgrad::optim::detail {
AdamKernels adam_avx512() { return isa_avx512::kernels<xsimd::avx512bw>(); }
}  // namespace ctgrad::optim::detail
