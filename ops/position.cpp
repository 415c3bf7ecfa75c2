#include <ctgrad/ops/position.hpp>
#include <ctgrad/graph/tensor.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

#include <cmath>
#include <string>

namespace ctgrad {

int relative_position_bucket(std::int64_t relative, bool bidirectional, int buckets, int max_distance) {
  int bucket = 0;
  std::int64_t n = -relative;  // memory_position - query_position, negated as in the reference code
  if (bidirectional) {
    buckets /= 2;
    if (n < 0) bucket += buckets;
    n = n < 0 ? -n : n;
  } else {
    n = n > 0 ? n : 0;
  }
  const int max_exact = buckets / 2;
  if (n < max_exact) return bucket + int(n);
  const int large = max_exact + int(std::log(double(n) / max_exact) / std::log(double(max_distance) / max_exact) * (buckets - max_exact));
  return bucket + std::min(large, buckets - 1);
}

namespace {
// Rows of the encoding at positions at[r] (or r when at is null).
template <class T>
void sinusoidal_rows(const OpArgs& a, const std::int32_t* at) {
  const std::int64_t len = a.out.size(0), d = a.out.size(1);
  T* pe = a.out.as<T>();
  kernel::parallel(len, 16, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const double p = at ? double(at[r]) : double(r);
      for (std::int64_t i = 0; i < d; i += 2) {
        const double w = std::exp(-double(i) * std::log(10000.0) / double(d));
        pe[r * d + i] = T(std::sin(p * w));
        pe[r * d + i + 1] = T(std::cos(p * w));
      }
    }
  });
}
}  // namespace

template <class T>
void SinusoidalPositionsOp::forward(const OpArgs& a) {
  sinusoidal_rows<T>(a, nullptr);
}
template <class T>
void SinusoidalPositionsAtOp::forward(const OpArgs& a) {
  sinusoidal_rows<T>(a, a.in[0].as<std::int32_t>());
}

template <class T>
void PrefixRowsOp::forward(const OpArgs& a) {
  const std::int64_t len = a.out.size(0), rows = a.in[0].size(0), d = a.out.size(1);
  if (len > rows)
    throw shape_error("ctgrad: op prefix_rows: a sequence of length " + std::to_string(len) + " is longer than the " +
                      std::to_string(rows) + " positions the table holds (the model's context length)");
  std::memcpy(a.out.data, a.in[0].data, std::size_t(len * d) * sizeof(T));
}
template <class T>
void PrefixRowsOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  T* gt = a.gin[0].as<T>();
  kernel::parallel(a.out.numel, kernel::grain_for(), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) gt[i] += g[i];
  });
}

template <class T>
void RelativePositionBiasOp::forward(const OpArgs& a) {
  const std::int64_t H = a.out.size(1), Tq = a.out.size(2), Tk = a.out.size(3);
  const RelativeBiasOptions o = a.attrs<RelativePositionBiasOp>().relative;
  const int buckets = o.buckets, maxd = o.max_distance;
  const bool bi = o.bidirectional;
  const T* table = a.in[0].as<T>();
  T* out = a.out.as<T>();
  const std::int64_t at = Tk - Tq;  // query i sits at position at + i: the last Tq of Tk (a decoding step over a cache)
  kernel::parallel(Tq, 8, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i)
      for (std::int64_t j = 0; j < Tk; ++j) {
        const int bucket = relative_position_bucket(j - (at + i), bi, buckets, maxd);
        for (std::int64_t h = 0; h < H; ++h) out[(h * Tq + i) * Tk + j] = table[bucket * H + h];
      }
  });
}
template <class T>
void RelativePositionBiasOp::vjp(const OpArgs& a) {
  const std::int64_t H = a.out.size(1), Tq = a.out.size(2), Tk = a.out.size(3);
  const RelativeBiasOptions o = a.attrs<RelativePositionBiasOp>().relative;
  const int buckets = o.buckets, maxd = o.max_distance;
  const bool bi = o.bidirectional;
  const T* g = a.gout->as<T>();
  T* gt = a.gin[0].as<T>();
  const std::int64_t at = Tk - Tq;
  // Heads in parallel; within a head, positions in order: repeated buckets add deterministically.
  kernel::parallel(H, 1, [&](std::int64_t h0, std::int64_t h1) {
    for (std::int64_t h = h0; h < h1; ++h)
      for (std::int64_t i = 0; i < Tq; ++i)
        for (std::int64_t j = 0; j < Tk; ++j) gt[relative_position_bucket(j - (at + i), bi, buckets, maxd) * H + h] += g[(h * Tq + i) * Tk + j];
  });
}

template void SinusoidalPositionsOp::forward<float>(const OpArgs&);
template void SinusoidalPositionsOp::forward<double>(const OpArgs&);
template void SinusoidalPositionsAtOp::forward<float>(const OpArgs&);
template void SinusoidalPositionsAtOp::forward<double>(const OpArgs&);

CTGRAD_INSTANTIATE_OP(PrefixRowsOp)
CTGRAD_INSTANTIATE_OP(RelativePositionBiasOp)

}  // namespace ctgrad
