#include <ctgrad/ops/norm.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

#include <cmath>

namespace ctgrad {
namespace {

// Parameter gradients: columns in parallel, rows summed in order. f(r, j) -> (dgamma, dbeta) terms.
template <class T, class F>
void param_grads(std::int64_t rows, std::int64_t D, T* ggamma, T* gbeta, F f) {
  if (!ggamma && !gbeta) return;
  kernel::parallel(D, 64, [&](std::int64_t b, std::int64_t e) {
    T acc_g[64] = {}, acc_b[64] = {};
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = b; j < e; ++j) {
        auto [dg, db] = f(r, j);
        acc_g[j - b] += dg;
        acc_b[j - b] += db;
      }
    for (std::int64_t j = b; j < e; ++j) {
      if (ggamma) ggamma[j] += acc_g[j - b];
      if (gbeta) gbeta[j] += acc_b[j - b];
    }
  });
}

}  // namespace

namespace {
template <class T>
void layer_norm_rows(const OpArgs& a, const simd::Table& t, bool parallel) {
  const std::int64_t D = a.out.size(-1), rows = a.out.rows();
  const T *x = a.in[0].as<T>(), *gamma = a.in[1].as<T>(), *beta = a.in[2].as<T>();
  T *y = a.out.as<T>(), *stats = a.scratch.as<T>();
  const LayerNormOptions o = a.attrs<LayerNormOp>();
  const double eps = o.eps;
  const bool std_form = o.form == NormForm::std_plus_eps;
  constexpr int ti = std::is_same_v<T, double>;
  kernel::parallel(rows, parallel ? kernel::grain_for(5 * D) : rows + 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T* xr = x + r * D;
      const T mean = T(t.row_sum[ti](xr, D) / double(D));
      const T ss = T(t.row_sq_dev[ti](xr, D, double(mean)));
      T sd = 0, inv;
      if (std_form) {
        sd = std::sqrt(ss / T(D > 1 ? D - 1 : 1));
        inv = T(1) / (sd + T(eps));
      } else {
        inv = T(1) / std::sqrt(ss / T(D) + T(eps));
      }
      stats[3 * r] = mean, stats[3 * r + 1] = inv, stats[3 * r + 2] = sd;
      t.norm_row[ti](xr, y + r * D, D, double(mean), double(inv), gamma, beta);
    }
  });
}
template <class T>
void rms_norm_rows(const OpArgs& a, const simd::Table& t, bool parallel) {
  const std::int64_t D = a.out.size(-1), rows = a.out.rows();
  const T *x = a.in[0].as<T>(), *gamma = a.in[1].as<T>();
  T *y = a.out.as<T>(), *stats = a.scratch.as<T>();
  constexpr int ti = std::is_same_v<T, double>;
  const T eps = T(double(a.attrs<RmsNormOp>().eps));
  kernel::parallel(rows, parallel ? kernel::grain_for(3 * D) : rows + 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T inv = T(1) / std::sqrt(T(t.row_sq_dev[ti](x + r * D, D, 0.0)) / T(D) + eps);

      stats[3 * r + 1] = inv;
      t.norm_row[ti](x + r * D, y + r * D, D, 0.0, double(inv), gamma, nullptr);
    }
  });
}
}  // namespace

template <class T>
void LayerNormOp::forward(const OpArgs& a) {
  layer_norm_rows<T>(a, simd::best(), true);
}
template <class T>
void LayerNormOp::reference_forward(const OpArgs& a) {
  layer_norm_rows<T>(a, *simd::table("scalar"), false);
}

template <class T>
void LayerNormOp::vjp(const OpArgs& a) {
  const std::int64_t D = a.out.size(-1), rows = a.out.rows();
  const T *x = a.in[0].as<T>(), *gamma = a.in[1].as<T>(), *g = a.gout->as<T>(), *stats = a.scratch.as<T>();
  const bool std_form = a.attrs<LayerNormOp>().form == NormForm::std_plus_eps;
  if (T* gx = a.gin[0].as<T>()) {
    const auto& t = simd::best();
    constexpr int ti = std::is_same_v<T, double>;
    kernel::parallel(rows, kernel::grain_for(6 * D), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const double mean = stats[3 * r], inv = stats[3 * r + 1], sd = stats[3 * r + 2];
        double sums[2];  // sum(dy), sum(dy * (x - mean)), dy = g * gamma
        t.norm_vjp_sums[ti](x + r * D, g + r * D, gamma, D, mean, sums);
        // standard: dx = inv (dy - mean(dy) - d inv^2 mean(dy d))
        // std+eps:  dx = inv (dy - mean(dy)) - inv^2 d sum(dy d) / ((D-1) std)
        const double c = std_form ? (sd > 0 ? inv * inv * sums[1] / (double(D > 1 ? D - 1 : 1) * sd) : 0.0)
                                  : inv * inv * inv * sums[1] / double(D);
        t.norm_vjp_apply[ti](x + r * D, g + r * D, gamma, gx + r * D, D, mean, inv, sums[0] / double(D), c, a.assign(0));
      }
    });
  }
  param_grads<T>(rows, D, a.gin[1].as<T>(), a.gin[2].as<T>(), [&](std::int64_t r, std::int64_t j) {
    const T xhat = (x[r * D + j] - stats[3 * r]) * stats[3 * r + 1];
    return std::pair<T, T>{g[r * D + j] * xhat, g[r * D + j]};
  });
}

template <class T>
void RmsNormOp::forward(const OpArgs& a) {
  rms_norm_rows<T>(a, simd::best(), true);
}
template <class T>
void RmsNormOp::reference_forward(const OpArgs& a) {
  rms_norm_rows<T>(a, *simd::table("scalar"), false);
}

template <class T>
void RmsNormOp::vjp(const OpArgs& a) {
  const std::int64_t D = a.out.size(-1), rows = a.out.rows();
  const T *x = a.in[0].as<T>(), *gamma = a.in[1].as<T>(), *g = a.gout->as<T>(), *stats = a.scratch.as<T>();
  if (T* gx = a.gin[0].as<T>()) {
    const auto& t = simd::best();
    constexpr int ti = std::is_same_v<T, double>;
    kernel::parallel(rows, kernel::grain_for(4 * D), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const double inv = stats[3 * r + 1];
        double sums[2];  // sums[1] = sum(dy * x)
        t.norm_vjp_sums[ti](x + r * D, g + r * D, gamma, D, 0.0, sums);
        t.norm_vjp_apply[ti](x + r * D, g + r * D, gamma, gx + r * D, D, 0.0, inv, 0.0, inv * inv * inv * sums[1] / double(D),
                             a.assign(0));
      }
    });
  }
  param_grads<T>(rows, D, a.gin[1].as<T>(), static_cast<T*>(nullptr), [&](std::int64_t r, std::int64_t j) {
    return std::pair<T, T>{g[r * D + j] * x[r * D + j] * stats[3 * r + 1], T(0)};
  });
}

CTGRAD_INSTANTIATE_OP(LayerNormOp)
CTGRAD_INSTANTIATE_OP(RmsNormOp)
template void LayerNormOp::reference_forward<float>(const OpArgs&);
template void LayerNormOp::reference_forward<double>(const OpArgs&);
template void RmsNormOp::reference_forward<float>(const OpArgs&);
template void RmsNormOp::reference_forward<double>(const OpArgs&);

}  // namespace ctgrad
