#include <ctgrad/ops/softmax.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

#include <cmath>

namespace ctgrad {

namespace {
template <class T>
void softmax_rows(const OpArgs& a, bool log, const simd::Table& t, bool parallel) {
  const std::int64_t n = a.out.size(-1), rows = a.out.rows();
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  const auto k = t.softmax_row[std::is_same_v<T, double>];
  kernel::parallel(rows, parallel ? kernel::grain_for(4 * n) : rows + 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) k(x + r * n, y + r * n, n, log, nullptr);
  });
}
}  // namespace

template <class T>
void SoftmaxOp::forward(const OpArgs& a) {
  softmax_rows<T>(a, false, simd::best(), true);
}
template <class T>
void SoftmaxOp::reference_forward(const OpArgs& a) {
  softmax_rows<T>(a, false, *simd::table("scalar"), false);
}

namespace {
template <class T>
void softmax_vjp_rows(const OpArgs& a, bool log) {
  const std::int64_t n = a.out.size(-1), rows = a.out.rows();
  const T *y = a.out.as<T>(), *g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const auto k = simd::best().softmax_vjp_row[std::is_same_v<T, double>];
  kernel::parallel(rows, kernel::grain_for(3 * n), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) k(y + r * n, g + r * n, gx + r * n, n, log, a.assign(0));
  });
}
}  // namespace

template <class T>
void SoftmaxOp::vjp(const OpArgs& a) {
  softmax_vjp_rows<T>(a, false);
}

template <class T>
void LogSoftmaxOp::forward(const OpArgs& a) {
  softmax_rows<T>(a, true, simd::best(), true);
}
template <class T>
void LogSoftmaxOp::reference_forward(const OpArgs& a) {
  softmax_rows<T>(a, true, *simd::table("scalar"), false);
}

template <class T>
void LogSoftmaxOp::vjp(const OpArgs& a) {
  softmax_vjp_rows<T>(a, true);
}

CTGRAD_INSTANTIATE_OP(SoftmaxOp)
CTGRAD_INSTANTIATE_OP(LogSoftmaxOp)
template void SoftmaxOp::reference_forward<float>(const OpArgs&);
template void SoftmaxOp::reference_forward<double>(const OpArgs&);
template void LogSoftmaxOp::reference_forward<float>(const OpArgs&);
template void LogSoftmaxOp::reference_forward<double>(const OpArgs&);

}  // namespace ctgrad
