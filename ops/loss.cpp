#include <ctgrad/ops/loss.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

namespace ctgrad {

template <class T>
void CrossEntropyOp::forward(const OpArgs& a) {
  const std::int64_t C = a.in[0].size(-1), rows = a.in[0].rows();
  const T* x = a.in[0].as<T>();
  const std::int32_t* t = a.in[1].as<std::int32_t>();
  T* lse = a.scratch.as<T>();
  const CrossEntropyOptions o = a.attrs<CrossEntropyOp>();
  const std::int64_t ignore = o.ignore_index;
  for (std::int64_t r = 0; r < rows; ++r)
    if (t[r] != ignore && (t[r] < 0 || t[r] >= C))
      throw std::out_of_range("ctgrad: op cross_entropy: target " + std::to_string(t[r]) + " at row " +
                              std::to_string(r) + " is outside [0, " + std::to_string(C) + ")");
  // Each row's log-sum-exp and loss in one parallel pass (the smoothing's row sum reads the row
  // while it is in cache), then the losses added in row order: the same bits on any thread count.
  T* nll = lse + rows;
  const T eps = static_cast<T>(double(o.label_smoothing));
  const auto logsumexp = simd::best().row_logsumexp[std::is_same_v<T, double>];
  const auto row_sum = simd::best().row_sum[std::is_same_v<T, double>];
  kernel::parallel(rows, kernel::grain_for(2 * C), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T* xr = x + r * C;
      lse[r] = T(logsumexp(xr, C));
      if (t[r] == ignore) continue;
      nll[r] = lse[r] - xr[t[r]];
      if (eps > T(0)) nll[r] = (T(1) - eps) * nll[r] + eps * (lse[r] - T(row_sum(xr, C)) / T(C));
    }
  });
  T total = 0;
  std::int64_t count = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (t[r] == ignore) continue;
    total += nll[r];
    ++count;
  }
  *a.out.as<T>() = count ? total / T(count) : T(0);
}

template <class T>
void CrossEntropyOp::vjp(const OpArgs& a) {
  const std::int64_t C = a.in[0].size(-1), rows = a.in[0].rows();
  const T* x = a.in[0].as<T>();
  const std::int32_t* t = a.in[1].as<std::int32_t>();
  const T* lse = a.scratch.as<T>();
  const CrossEntropyOptions o = a.attrs<CrossEntropyOp>();
  const std::int64_t ignore = o.ignore_index;
  std::int64_t count = 0;
  for (std::int64_t r = 0; r < rows; ++r) count += t[r] != ignore;
  T* gx = a.gin[0].as<T>();
  const bool assign = a.assign(0);  // then ignored rows get zeros
  if (!count) {
    if (assign) std::fill(gx, gx + rows * C, T(0));
    return;
  }
  const T g = *a.gout->as<T>() / T(count), eps = static_cast<T>(double(o.label_smoothing));
  const auto grad_row = simd::best().xent_grad_row[std::is_same_v<T, double>];
  kernel::parallel(rows, kernel::grain_for(2 * C), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      T* gr = gx + r * C;
      if (t[r] == ignore) {
        if (assign) std::fill(gr, gr + C, T(0));
        continue;
      }
      grad_row(x + r * C, gr, C, double(lse[r]), double(g), double(g * eps / T(C)), assign);
      gr[t[r]] -= g * (T(1) - eps);
    }
  });
}

template <class T>
void MseOp::forward(const OpArgs& a) {
  const T *p = a.in[0].as<T>(), *q = a.in[1].as<T>();
  const std::int64_t n = a.in[0].numel;
  T total = 0;
  for (std::int64_t i = 0; i < n; ++i) total += (p[i] - q[i]) * (p[i] - q[i]);
  *a.out.as<T>() = total / T(n);
}

template <class T>
void MseOp::vjp(const OpArgs& a) {
  const T *p = a.in[0].as<T>(), *q = a.in[1].as<T>();
  const std::int64_t n = a.in[0].numel;
  const T g = T(2) * *a.gout->as<T>() / T(n);
  for (int k = 0; k < 2; ++k) {
    T* gk = a.gin[k].as<T>();
    if (!gk) continue;
    const T sign = k == 0 ? T(1) : T(-1);
    const bool assign = a.assign(k);
    kernel::parallel(n, kernel::grain_for(), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) gk[i] = (assign ? T(0) : gk[i]) + sign * g * (p[i] - q[i]);
    });
  }
}

CTGRAD_INSTANTIATE_OP(CrossEntropyOp)
CTGRAD_INSTANTIATE_OP(MseOp)

}  // namespace ctgrad
