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
  const auto logsumexp = simd::best().row_logsumexp[std::is_same_v<T, double>];
  kernel::parallel(rows, kernel::grain_for(2 * C), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) lse[r] = T(logsumexp(x + r * C, C));
  });
  const T eps = static_cast<T>(double(o.label_smoothing));
  const auto row_sum = simd::best().row_sum[std::is_same_v<T, double>];
  T total = 0;
  std::int64_t count = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (t[r] == ignore) continue;
    T nll = lse[r] - x[r * C + t[r]];
    if (eps > T(0)) nll = (T(1) - eps) * nll + eps * (lse[r] - T(row_sum(x + r * C, C)) / T(C));
    total += nll;
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
  const simd::Table& tab = simd::best();
  constexpr int ti = std::is_same_v<T, double>;
  kernel::parallel(rows, kernel::grain_for(2 * C), [&](std::int64_t b, std::int64_t e) {
    constexpr std::int64_t kChunk = 512;
    alignas(64) T p[kChunk];  // softmax of a chunk of the row, on the stack: no heap in a step
    for (std::int64_t r = b; r < e; ++r) {
      T* gr = gx + r * C;
      if (t[r] == ignore) {
        if (assign) std::fill(gr, gr + C, T(0));
        continue;
      }
      const T* xr = x + r * C;
      const T l = lse[r], off = g * eps / T(C);
      for (std::int64_t j0 = 0; j0 < C; j0 += kChunk) {
        const std::int64_t n = std::min(kChunk, C - j0);
        for (std::int64_t j = 0; j < n; ++j) p[j] = xr[j0 + j] - l;
        tab.unary[simd::exp][ti](p, p, n, 0);
        if (assign)
          for (std::int64_t j = 0; j < n; ++j) gr[j0 + j] = g * p[j] - off;
        else
          for (std::int64_t j = 0; j < n; ++j) gr[j0 + j] += g * p[j] - off;
      }
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
