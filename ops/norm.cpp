#include <ctgrad/ops/norm.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

#include <cmath>

namespace ctgrad {
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

// One pass over the rows: each row's input gradient and its terms of the parameter gradients
// (kernel::rows_with_column_sums: per-block partial sums, added in block order).
template <class T>
void LayerNormOp::vjp(const OpArgs& a) {
  const std::int64_t D = a.out.size(-1), rows = a.out.rows();
  const T *x = a.in[0].as<T>(), *gamma = a.in[1].as<T>(), *g = a.gout->as<T>(), *stats = a.scratch.as<T>();
  const bool std_form = a.attrs<LayerNormOp>().form == NormForm::std_plus_eps;
  const auto& t = simd::best();
  constexpr int ti = std::is_same_v<T, double>;
  T* gx = a.gin[0].as<T>();
  T* const params[2] = {a.gin[1].as<T>(), a.gin[2].as<T>()};  // dgamma, dbeta: added to (parameters accumulate)
  const bool param_grads = params[0] || params[1];
  kernel::rows_with_column_sums<T>(rows, D, 2, params, 0u, [&](std::int64_t r, T* acc) {
    const double mean = stats[3 * r], inv = stats[3 * r + 1], sd = stats[3 * r + 2];
    if (gx) {
      double sums[2];  // sum(dy), sum(dy * (x - mean)), dy = g * gamma
      t.norm_vjp_sums[ti](x + r * D, g + r * D, gamma, D, mean, sums);
      // standard: dx = inv (dy - mean(dy) - d inv^2 mean(dy d))
      // std+eps:  dx = inv (dy - mean(dy)) - inv^2 d sum(dy d) / ((D-1) std)
      const double c = std_form ? (sd > 0 ? inv * inv * sums[1] / (double(D > 1 ? D - 1 : 1) * sd) : 0.0)
                                : inv * inv * inv * sums[1] / double(D);
      t.norm_vjp_apply[ti](x + r * D, g + r * D, gamma, gx + r * D, D, mean, inv, sums[0] / double(D), c, a.assign(0));
    }
    if (param_grads) t.norm_param_row[ti](x + r * D, g + r * D, D, mean, inv, acc, acc + D);
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
  const auto& t = simd::best();
  constexpr int ti = std::is_same_v<T, double>;
  T* gx = a.gin[0].as<T>();
  T* const params[1] = {a.gin[1].as<T>()};
  kernel::rows_with_column_sums<T>(rows, D, 1, params, 0u, [&](std::int64_t r, T* acc) {
    const double inv = stats[3 * r + 1];
    if (gx) {
      double sums[2];  // sums[1] = sum(dy * x)
      t.norm_vjp_sums[ti](x + r * D, g + r * D, gamma, D, 0.0, sums);
      t.norm_vjp_apply[ti](x + r * D, g + r * D, gamma, gx + r * D, D, 0.0, inv, 0.0, inv * inv * inv * sums[1] / double(D),
                           a.assign(0));
    }
    if (params[0]) t.norm_param_row[ti](x + r * D, g + r * D, D, 0.0, inv, acc, nullptr);
  });
}

CTGRAD_INSTANTIATE_OP(LayerNormOp)
CTGRAD_INSTANTIATE_OP(RmsNormOp)
template void LayerNormOp::reference_forward<float>(const OpArgs&);
template void LayerNormOp::reference_forward<double>(const OpArgs&);
template void RmsNormOp::reference_forward<float>(const OpArgs&);
template void RmsNormOp::reference_forward<double>(const OpArgs&);

}  // namespace ctgrad
