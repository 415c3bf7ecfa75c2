// What a kernel outside the library needs (a custom op's forward and vjp, an optimizer's update):
// parallel loops whose partition never depends on the thread count (same bits on 1 or 64
// threads), broadcasting helpers, and the SIMD vector routines ctgrad's own kernels use, chosen at
// run time for the CPU (SSE2, AVX2, AVX-512). The ops/detail/ headers behind it are internal.
//
//   ctgrad::parallel(n, grain, [&](std::int64_t begin, std::int64_t end) { ... });
//   ctgrad::vec::scale(x, n, 0.5);  ctgrad::vec::sum_squares(g, n);
#pragma once
#include <cstdint>
#include <type_traits>

#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

namespace ctgrad {

// f(begin, end) over [0, n) in chunks of `grain` elements, in parallel on the calling program's
// threads; the chunks depend only on n and grain.
using kernel::parallel;
// A grain for elementwise work of `cost` flops per element (about 32k flops per task).
using kernel::grain_for;
// Broadcasting (NumPy rules) of an input to an op's output: strides, offsets, and the reduction
// of a gradient over the broadcast dims in a fixed order.
using kernel::broadcast_strides;
using kernel::offset_of;
using kernel::reduce_broadcast;
// Sums down the rows (a bias's or a norm's parameter gradient) in row blocks fixed by the shape,
// partial sums added in block order, with each row's other work in the same pass.
using kernel::rows_with_column_sums;

namespace vec {
namespace detail {
template <class T>
constexpr int precision = std::is_same_v<T, double> ? 1 : 0;
}

// x[i] *= factor
template <class T>
void scale(T* x, std::int64_t n, double factor) {
  simd::best().unary[simd::scale][detail::precision<T>](x, x, n, factor);
}
// y[i] += alpha * x[i]
template <class T>
void axpy(const T* x, T* y, std::int64_t n, double alpha = 1.0) {
  simd::best().axpy[detail::precision<T>](x, nullptr, y, n, alpha, false);
}
// sum of x[i]^2, accumulated in the working precision within SIMD lanes
template <class T>
double sum_squares(const T* x, std::int64_t n) {
  return simd::best().row_sq_dev[detail::precision<T>](x, n, 0.0);
}
// sum of x[i]
template <class T>
double sum(const T* x, std::int64_t n) {
  return simd::best().row_sum[detail::precision<T>](x, n);
}

// The instruction set the kernels run ("scalar", "sse2", "avx2", "avx512"): the CPU's best, or
// CTGRAD_SIMD's. A library's own SIMD kernels (optim's Adam) take the same one.
inline const char* isa() { return simd::best().arch; }

}  // namespace vec
}  // namespace ctgrad
