#include <ctgrad/ops/reduce.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

namespace ctgrad {
namespace {

struct Split {
  std::int64_t outer, len, inner;
};

// The reduced axis as (outer, len, inner); a full reduction is one axis of length numel. And the
// variance's correction.
struct Reduction {
  Split s;
  std::int64_t correction = 0;
};
template <class Op>
Reduction reduction_of(const OpArgs& a) {
  const auto o = a.attrs<Op>();
  const TensorRef& x = a.in[0];
  Reduction r{{1, x.numel, 1}, 0};
  if constexpr (requires { o.correction; }) r.correction = o.correction;
  if constexpr (requires { o.axis; }) {
    const int ax = ops::norm_axis(o.axis, x.rank);
    r.s = {1, x.dim[static_cast<std::size_t>(ax)], 1};
    for (int i = 0; i < ax; ++i) r.s.outer *= x.dim[static_cast<std::size_t>(i)];
    for (int i = ax + 1; i < x.rank; ++i) r.s.inner *= x.dim[static_cast<std::size_t>(i)];
  }
  return r;
}

template <class T>
void reduce_forward(const OpArgs& a, const Split s, bool mean, const simd::Table& t = simd::best(), bool parallel = true) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  const T norm = mean ? T(1) / T(s.len) : T(1);
  const auto row_sum = t.row_sum[std::is_same_v<T, double>];
  if (s.outer == 1 && s.inner == 1) {
    // Full reduction: fixed chunks (independent of threads), partials summed in order.
    constexpr std::int64_t kParts = 64;
    const std::int64_t chunk = std::max<std::int64_t>(4096, (s.len + kParts - 1) / kParts);
    const std::int64_t parts = (s.len + chunk - 1) / chunk;
    T partial[kParts] = {};
    kernel::parallel(parts, parallel ? 1 : parts + 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t p = b; p < e; ++p) partial[p] = T(row_sum(x + p * chunk, std::min(s.len, (p + 1) * chunk) - p * chunk));
    });
    T total = 0;
    for (std::int64_t p = 0; p < parts; ++p) total += partial[p];
    y[0] = total * norm;
    return;
  }
  const std::int64_t grain = parallel ? kernel::grain_for(s.len) : s.outer * s.inner + 1;
  if (s.inner == 1) {  // reducing the last axis: contiguous rows
    kernel::parallel(s.outer, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) y[o] = T(row_sum(x + o * s.len, s.len)) * norm;
    });
    return;
  }
  if (!parallel) {  // the reference: each output element on its own
    for (std::int64_t o = 0; o < s.outer * s.inner; ++o) {
      const std::int64_t i0 = o / s.inner, j = o % s.inner;
      T acc = 0;
      for (std::int64_t r = 0; r < s.len; ++r) acc += x[(i0 * s.len + r) * s.inner + j];
      y[o] = acc * norm;
    }
    return;
  }
  // A middle axis: the output row of `inner` elements accumulates the len input rows in order
  // (each element's sum in the same order as one at a time), contiguous and vectorised.
  kernel::parallel(s.outer, std::max<std::int64_t>(1, kernel::grain_for(s.len * s.inner)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i0 = b; i0 < e; ++i0) {
      T* yr = y + i0 * s.inner;
      const T* xr = x + i0 * s.len * s.inner;
      std::fill_n(yr, s.inner, T(0));
      for (std::int64_t r = 0; r < s.len; ++r)
        for (std::int64_t j = 0; j < s.inner; ++j) yr[j] += xr[r * s.inner + j];
      if (mean)
        for (std::int64_t j = 0; j < s.inner; ++j) yr[j] *= norm;
    }
  });
}

template <class T>
void reduce_vjp(const OpArgs& a, const Split s, bool mean) {
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const T norm = mean ? T(1) / T(s.len) : T(1);
  const bool assign = a.assign(0);
  // Row by row: input row (i0, r) takes output row i0 (a scalar when inner is 1).
  const std::int64_t rows = s.outer * s.len;
  kernel::parallel(rows, std::max<std::int64_t>(1, kernel::grain_for(s.inner)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t q = b; q < e; ++q) {
      const T* gr = g + (q / s.len) * s.inner;
      T* d = gx + q * s.inner;
      if (assign)
        for (std::int64_t j = 0; j < s.inner; ++j) d[j] = gr[j] * norm;
      else
        for (std::int64_t j = 0; j < s.inner; ++j) d[j] += gr[j] * norm;
    }
  });
}


// out[o] for each (outer, inner) position, reading the `len` elements of the reduced axis.
template <class F>
void for_each_lane(const Split& s, std::int64_t cost, F f) {
  kernel::parallel(s.outer * s.inner, kernel::grain_for(cost * s.len), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) f(o, (o / s.inner) * s.len * s.inner + o % s.inner);
  });
}

template <class T>
void max_forward(const OpArgs& a, const Split s, bool simd_lanes) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  if (s.inner == 1 && simd_lanes) {  // contiguous lanes: SIMD
    const auto row_max = simd::best().row_max[std::is_same_v<T, double>];
    kernel::parallel(s.outer, kernel::grain_for(s.len), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) y[o] = T(row_max(x + o * s.len, s.len));
    });
    return;
  }
  for_each_lane(s, 1, [&](std::int64_t o, std::int64_t base) {
    T m = x[base];
    for (std::int64_t r = 1; r < s.len; ++r) m = std::max(m, x[base + r * s.inner]);
    y[o] = m;
  });
}
template <class T>
void max_vjp(const OpArgs& a, const Split s) {
  const T *x = a.in[0].as<T>(), *y = a.out.as<T>(), *g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const bool assign = a.assign(0);
  for_each_lane(s, 1, [&](std::int64_t o, std::int64_t base) {
    if (assign)
      for (std::int64_t r = 0; r < s.len; ++r) gx[base + r * s.inner] = T(0);
    for (std::int64_t r = 0; r < s.len; ++r)
      if (x[base + r * s.inner] == y[o]) {
        gx[base + r * s.inner] += g[o];
        break;
      }
  });
}

template <class T>
void var_forward(const OpArgs& a, const Split s, std::int64_t correction, bool simd_lanes) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  const T denom = T(std::max<std::int64_t>(1, s.len - correction));
  if (s.inner == 1 && simd_lanes) {  // contiguous lanes: SIMD
    const auto& t = simd::best();
    constexpr int ti = std::is_same_v<T, double>;
    kernel::parallel(s.outer, kernel::grain_for(3 * s.len), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) {
        const double mean = t.row_sum[ti](x + o * s.len, s.len) / double(s.len);
        y[o] = T(t.row_sq_dev[ti](x + o * s.len, s.len, mean)) / denom;
      }
    });
    return;
  }
  for_each_lane(s, 3, [&](std::int64_t o, std::int64_t base) {
    T mean = 0, acc = 0;
    for (std::int64_t r = 0; r < s.len; ++r) mean += x[base + r * s.inner];
    mean /= T(s.len);
    for (std::int64_t r = 0; r < s.len; ++r) acc += (x[base + r * s.inner] - mean) * (x[base + r * s.inner] - mean);
    y[o] = acc / denom;
  });
}
template <class T>
void var_vjp(const OpArgs& a, const Split s, std::int64_t correction) {
  const T *x = a.in[0].as<T>(), *g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const T denom = T(std::max<std::int64_t>(1, s.len - correction));
  const bool assign = a.assign(0);
  for_each_lane(s, 3, [&](std::int64_t o, std::int64_t base) {
    T mean = 0;
    for (std::int64_t r = 0; r < s.len; ++r) mean += x[base + r * s.inner];
    mean /= T(s.len);
    for (std::int64_t r = 0; r < s.len; ++r) {
      T& d = gx[base + r * s.inner];
      d = (assign ? T(0) : d) + g[o] * T(2) * (x[base + r * s.inner] - mean) / denom;
    }
  });
}

// Both op templates dispatch here: the kernel of kind K over the reduction r.
template <reduce::Kind K, class T>
void forward_of(const OpArgs& a, const Reduction& r, bool reference) {
  const simd::Table& t = reference ? *simd::table("scalar") : simd::best();
  if constexpr (K == reduce::sum || K == reduce::mean) reduce_forward<T>(a, r.s, K == reduce::mean, t, !reference);
  else if constexpr (K == reduce::max) max_forward<T>(a, r.s, !reference);
  else var_forward<T>(a, r.s, r.correction, !reference);
}
template <reduce::Kind K, class T>
void vjp_of(const OpArgs& a, const Reduction& r) {
  if constexpr (K == reduce::sum || K == reduce::mean) reduce_vjp<T>(a, r.s, K == reduce::mean);
  else if constexpr (K == reduce::max) max_vjp<T>(a, r.s);
  else var_vjp<T>(a, r.s, r.correction);
}

}  // namespace

template <reduce::Kind K>
template <class T>
void ReduceAxisOp<K>::forward(const OpArgs& a) {
  forward_of<K, T>(a, reduction_of<ReduceAxisOp<K>>(a), false);
}
template <reduce::Kind K>
template <class T>
void ReduceAxisOp<K>::reference_forward(const OpArgs& a) {
  forward_of<K, T>(a, reduction_of<ReduceAxisOp<K>>(a), true);
}
template <reduce::Kind K>
template <class T>
void ReduceAxisOp<K>::vjp(const OpArgs& a) {
  vjp_of<K, T>(a, reduction_of<ReduceAxisOp<K>>(a));
}
template <reduce::Kind K>
template <class T>
void ReduceAllOp<K>::forward(const OpArgs& a) {
  forward_of<K, T>(a, reduction_of<ReduceAllOp<K>>(a), false);
}
template <reduce::Kind K>
template <class T>
void ReduceAllOp<K>::reference_forward(const OpArgs& a) {
  forward_of<K, T>(a, reduction_of<ReduceAllOp<K>>(a), true);
}
template <reduce::Kind K>
template <class T>
void ReduceAllOp<K>::vjp(const OpArgs& a) {
  vjp_of<K, T>(a, reduction_of<ReduceAllOp<K>>(a));
}

#define CTGRAD_INSTANTIATE_REDUCE(Op)                                 \
  CTGRAD_INSTANTIATE_OP(Op)                                           \
  template void Op::reference_forward<float>(const OpArgs&);          \
  template void Op::reference_forward<double>(const OpArgs&);
CTGRAD_INSTANTIATE_REDUCE(SumOp)
CTGRAD_INSTANTIATE_REDUCE(MeanOp)
CTGRAD_INSTANTIATE_REDUCE(MaxOp)
CTGRAD_INSTANTIATE_REDUCE(VarOp)
CTGRAD_INSTANTIATE_REDUCE(SumAllOp)
CTGRAD_INSTANTIATE_REDUCE(MeanAllOp)
CTGRAD_INSTANTIATE_REDUCE(MaxAllOp)
CTGRAD_INSTANTIATE_REDUCE(VarAllOp)

}  // namespace ctgrad
