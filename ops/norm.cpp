#include <ctgrad/ops/norm.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

#include <cmath>

namespace ctgrad {

template <class T>
void LayerNormOp::forward(const OpArgs& a) {
  const std::int64_t D = a.out.size(-1), rows = a.out.rows();
  const T *x = a.in[0].as<T>(), *gamma = a.in[1].as<T>(), *beta = a.in[2].as<T>();
  T *y = a.out.as<T>(), *stats = a.scratch.as<T>();
  const T eps = static_cast<T>(a.attr.f[0]);
  kernel::parallel(rows, kernel::grain_for(5 * D), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T* xr = x + r * D;
      T mean = 0;
      for (std::int64_t j = 0; j < D; ++j) mean += xr[j];
      mean /= T(D);
      T var = 0;
      for (std::int64_t j = 0; j < D; ++j) var += (xr[j] - mean) * (xr[j] - mean);
      const T rstd = T(1) / std::sqrt(var / T(D) + eps);
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
      for (std::int64_t j = 0; j < D; ++j) y[r * D + j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
    }
  });
}

template <class T>
void LayerNormOp::vjp(const OpArgs& a) {
  const std::int64_t D = a.out.size(-1), rows = a.out.rows();
  const T *x = a.in[0].as<T>(), *gamma = a.in[1].as<T>(), *g = a.gout->as<T>(), *stats = a.scratch.as<T>();
  if (T* gx = a.gin[0].as<T>()) {
    kernel::parallel(rows, kernel::grain_for(6 * D), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const T mean = stats[2 * r], rstd = stats[2 * r + 1];
        const T *xr = x + r * D, *gr = g + r * D;
        T sum_dy = 0, sum_dy_xhat = 0;
        for (std::int64_t j = 0; j < D; ++j) {
          const T dy = gr[j] * gamma[j];
          sum_dy += dy;
          sum_dy_xhat += dy * (xr[j] - mean) * rstd;
        }
        sum_dy /= T(D);
        sum_dy_xhat /= T(D);
        for (std::int64_t j = 0; j < D; ++j) {
          const T xhat = (xr[j] - mean) * rstd;
          gx[r * D + j] += rstd * (gr[j] * gamma[j] - sum_dy - xhat * sum_dy_xhat);
        }
      }
    });
  }
  // Parameter gradients: columns in parallel, rows summed in order.
  T *ggamma = a.gin[1].as<T>(), *gbeta = a.gin[2].as<T>();
  if (!ggamma && !gbeta) return;
  kernel::parallel(D, 64, [&](std::int64_t b, std::int64_t e) {
    T acc_g[64] = {}, acc_b[64] = {};
    for (std::int64_t r = 0; r < rows; ++r) {
      const T mean = stats[2 * r], rstd = stats[2 * r + 1];
      for (std::int64_t j = b; j < e; ++j) {
        acc_g[j - b] += g[r * D + j] * (x[r * D + j] - mean) * rstd;
        acc_b[j - b] += g[r * D + j];
      }
    }
    for (std::int64_t j = b; j < e; ++j) {
      if (ggamma) ggamma[j] += acc_g[j - b];
      if (gbeta) gbeta[j] += acc_b[j - b];
    }
  });
}

CTGRAD_INSTANTIATE_OP(LayerNormOp)

}  // namespace ctgrad
