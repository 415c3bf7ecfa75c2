#include <ctgrad/ops/softmax.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

#include <cmath>

namespace ctgrad {

template <class T>
void SoftmaxOp::forward(const OpArgs& a) {
  const std::int64_t n = a.out.size(-1), rows = a.out.rows();
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  kernel::parallel(rows, kernel::grain_for(4 * n), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      T m = xr[0];
      for (std::int64_t j = 1; j < n; ++j) m = std::max(m, xr[j]);
      T s = 0;
      for (std::int64_t j = 0; j < n; ++j) s += (yr[j] = std::exp(xr[j] - m));
      const T inv = T(1) / s;
      for (std::int64_t j = 0; j < n; ++j) yr[j] *= inv;
    }
  });
}

template <class T>
void SoftmaxOp::vjp(const OpArgs& a) {
  const std::int64_t n = a.out.size(-1), rows = a.out.rows();
  const T *y = a.out.as<T>(), *g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  kernel::parallel(rows, kernel::grain_for(3 * n), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T *yr = y + r * n, *gr = g + r * n;
      T dot = 0;
      for (std::int64_t j = 0; j < n; ++j) dot += gr[j] * yr[j];
      for (std::int64_t j = 0; j < n; ++j) gx[r * n + j] += yr[j] * (gr[j] - dot);
    }
  });
}

template <class T>
void LogSoftmaxOp::forward(const OpArgs& a) {
  const std::int64_t n = a.out.size(-1), rows = a.out.rows();
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  kernel::parallel(rows, kernel::grain_for(4 * n), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T* xr = x + r * n;
      T m = xr[0];
      for (std::int64_t j = 1; j < n; ++j) m = std::max(m, xr[j]);
      T s = 0;
      for (std::int64_t j = 0; j < n; ++j) s += std::exp(xr[j] - m);
      const T lse = m + std::log(s);
      for (std::int64_t j = 0; j < n; ++j) y[r * n + j] = xr[j] - lse;
    }
  });
}

template <class T>
void LogSoftmaxOp::vjp(const OpArgs& a) {
  const std::int64_t n = a.out.size(-1), rows = a.out.rows();
  const T *y = a.out.as<T>(), *g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  kernel::parallel(rows, kernel::grain_for(3 * n), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      T total = 0;
      for (std::int64_t j = 0; j < n; ++j) total += g[r * n + j];
      for (std::int64_t j = 0; j < n; ++j) gx[r * n + j] += g[r * n + j] - std::exp(y[r * n + j]) * total;
    }
  });
}

CTGRAD_INSTANTIATE_OP(SoftmaxOp)
CTGRAD_INSTANTIATE_OP(LogSoftmaxOp)

}  // namespace ctgrad
