#define CTGRAD_SIMD_ISA isa_scalar
#include <ctgrad/optim/detail/adam_kernel.hpp>

#include <string_view>

#include <ctgrad/ops/kernels.hpp>

namespace ctgrad::optim {
namespace {
// The kernels of the instruction set the ops run (vec::isa()), chosen once.
const detail::AdamKernels& chosen() {
  static const detail::AdamKernels k = [] {
    const std::string_view isa = vec::isa();
    if (isa == "avx512") return detail::adam_avx512();
    if (isa == "avx2") return detail::adam_avx2();
    if (isa == "sse2") return detail::adam_sse2();
    return detail::isa_scalar::kernels<void>();
  }();
  return k;
}
}  // namespace

void adam_update(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamStep& s) { chosen().f32(w, g, m, v, n, s); }
void adam_update(double* w, const double* g, double* m, double* v, std::int64_t n, const AdamStep& s) { chosen().f64(w, g, m, v, n, s); }

}  // namespace ctgrad::optim
