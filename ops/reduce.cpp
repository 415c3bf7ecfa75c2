#include <ctgrad/ops/reduce.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

namespace ctgrad {
namespace {

struct Split {
  std::int64_t outer, len, inner;
};

// The reduced axis as (outer, len, inner); a full reduction is one axis of length numel.
Split split_of(const OpArgs& a) {
  const TensorRef& x = a.in[0];
  if (a.attr.i[2]) return {1, x.numel, 1};
  int ax = ops::norm_axis(a.attr.i[0], x.rank);
  Split s{1, x.dim[static_cast<std::size_t>(ax)], 1};
  for (int i = 0; i < ax; ++i) s.outer *= x.dim[static_cast<std::size_t>(i)];
  for (int i = ax + 1; i < x.rank; ++i) s.inner *= x.dim[static_cast<std::size_t>(i)];
  return s;
}

template <class T>
void reduce_forward(const OpArgs& a, bool mean, const simd::Table& t = simd::best(), bool parallel = true) {
  const Split s = split_of(a);
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
  kernel::parallel(s.outer * s.inner, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      const std::int64_t i0 = o / s.inner, j = o % s.inner;
      T acc = 0;
      for (std::int64_t r = 0; r < s.len; ++r) acc += x[(i0 * s.len + r) * s.inner + j];
      y[o] = acc * norm;
    }
  });
}

template <class T>
void reduce_vjp(const OpArgs& a, bool mean) {
  const Split s = split_of(a);
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const T norm = mean ? T(1) / T(s.len) : T(1);
  kernel::parallel(a.in[0].numel, kernel::grain_for(), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const std::int64_t o = (i / (s.len * s.inner)) * s.inner + i % s.inner;
      gx[i] += g[o] * norm;
    }
  });
}

}  // namespace

template <class T>
void SumOp::forward(const OpArgs& a) {
  reduce_forward<T>(a, false);
}
template <class T>
void SumOp::reference_forward(const OpArgs& a) {
  reduce_forward<T>(a, false, *simd::table("scalar"), false);
}
template <class T>
void MeanOp::reference_forward(const OpArgs& a) {
  reduce_forward<T>(a, true, *simd::table("scalar"), false);
}
template <class T>
void SumOp::vjp(const OpArgs& a) {
  reduce_vjp<T>(a, false);
}
template <class T>
void MeanOp::forward(const OpArgs& a) {
  reduce_forward<T>(a, true);
}
template <class T>
void MeanOp::vjp(const OpArgs& a) {
  reduce_vjp<T>(a, true);
}

// out[o] for each (outer, inner) position, reading the `len` elements of the reduced axis.
template <class F>
void for_each_lane(const Split& s, std::int64_t cost, F f) {
  kernel::parallel(s.outer * s.inner, kernel::grain_for(cost * s.len), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) f(o, (o / s.inner) * s.len * s.inner + o % s.inner);
  });
}

template <class T>
void max_forward(const OpArgs& a, bool simd_lanes);
template <class T>
void var_forward(const OpArgs& a, bool simd_lanes);

template <class T>
void MaxOp::forward(const OpArgs& a) {
  max_forward<T>(a, true);
}
template <class T>
void MaxOp::reference_forward(const OpArgs& a) {
  max_forward<T>(a, false);
}
template <class T>
void max_forward(const OpArgs& a, bool simd_lanes) {
  const Split s = split_of(a);
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
void MaxOp::vjp(const OpArgs& a) {
  const Split s = split_of(a);
  const T *x = a.in[0].as<T>(), *y = a.out.as<T>(), *g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  for_each_lane(s, 1, [&](std::int64_t o, std::int64_t base) {
    for (std::int64_t r = 0; r < s.len; ++r)
      if (x[base + r * s.inner] == y[o]) {
        gx[base + r * s.inner] += g[o];
        break;
      }
  });
}

template <class T>
void VarOp::forward(const OpArgs& a) {
  var_forward<T>(a, true);
}
template <class T>
void VarOp::reference_forward(const OpArgs& a) {
  var_forward<T>(a, false);
}
template <class T>
void var_forward(const OpArgs& a, bool simd_lanes) {
  const Split s = split_of(a);
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  const T denom = T(std::max<std::int64_t>(1, s.len - a.attr.i[3]));
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
void VarOp::vjp(const OpArgs& a) {
  const Split s = split_of(a);
  const T *x = a.in[0].as<T>(), *g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const T denom = T(std::max<std::int64_t>(1, s.len - a.attr.i[3]));
  for_each_lane(s, 3, [&](std::int64_t o, std::int64_t base) {
    T mean = 0;
    for (std::int64_t r = 0; r < s.len; ++r) mean += x[base + r * s.inner];
    mean /= T(s.len);
    for (std::int64_t r = 0; r < s.len; ++r) gx[base + r * s.inner] += g[o] * T(2) * (x[base + r * s.inner] - mean) / denom;
  });
}

CTGRAD_INSTANTIATE_OP(SumOp)
template void SumOp::reference_forward<float>(const OpArgs&);
template void SumOp::reference_forward<double>(const OpArgs&);
template void MeanOp::reference_forward<float>(const OpArgs&);
template void MeanOp::reference_forward<double>(const OpArgs&);
CTGRAD_INSTANTIATE_OP(MaxOp)
CTGRAD_INSTANTIATE_OP(VarOp)
template void MaxOp::reference_forward<float>(const OpArgs&);
template void MaxOp::reference_forward<double>(const OpArgs&);
template void VarOp::reference_forward<float>(const OpArgs&);
template void VarOp::reference_forward<double>(const OpArgs&);
CTGRAD_INSTANTIATE_OP(MeanOp)

}  // namespace ctgrad
