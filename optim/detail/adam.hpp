// Adam's elementwise update, the optimizer's own kernel: written once over xsimd batches
// (adam_kernel.hpp) and compiled per instruction set like the ops' kernels (adam_sse2.cpp,
// adam_avx2.cpp, adam_avx512.cpp, each with its flags); the set every op runs is the one taken here
// (vec::isa(): the CPU's best, or CTGRAD_SIMD's), so one build runs on any x86-64 machine.
#pragma once
#include <cstdint>

namespace ctgrad::optim {

// One Adam/AdamW update of n elements (the arithmetic of torch.optim.Adam / AdamW):
//   decoupled: w *= shrink; else g += weight_decay w
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  w -= step m / (sqrt(v) / sqrt_bc2 + eps)
struct AdamStep {
  double shrink = 1, weight_decay = 0, beta1 = 0.9, beta2 = 0.999;
  double step = 0;      // lr / (1 - beta1^t)
  double sqrt_bc2 = 1;  // sqrt(1 - beta2^t)
  double eps = 1e-8;
  bool decoupled = false;
};

void adam_update(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamStep& s);
void adam_update(double* w, const double* g, double* m, double* v, std::int64_t n, const AdamStep& s);

namespace detail {
// One instruction set's kernels.
struct AdamKernels {
  void (*f32)(float*, const float*, float*, float*, std::int64_t, const AdamStep&);
  void (*f64)(double*, const double*, double*, double*, std::int64_t, const AdamStep&);
};
AdamKernels adam_scalar();
AdamKernels adam_sse2();
AdamKernels adam_avx2();
AdamKernels adam_avx512();
}  // namespace detail

}  // namespace ctgrad::optim
