#include <ctgrad/ops/select.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ctgrad {
namespace {

// Index i of row `row` checked against [lo, n): an error naming the op, the row and the value.
void check_index(const char* op, std::int64_t row, std::int32_t i, std::int64_t lo, std::int64_t n) {
  if (i < lo || i >= n)
    throw std::out_of_range(std::string("ctgrad: op ") + op + ": index " + std::to_string(i) + " at row " + std::to_string(row) +
                            " is outside [" + std::to_string(lo) + ", " + std::to_string(n) + ")");
}

// out[idx[i]] += src[i] for every row with idx[i] >= 0. Column blocks in parallel; within one, the
// rows in order: a row hit twice adds in a fixed order (bitwise on any thread count).
template <class T>
void scatter_add(T* out, const T* src, const std::int32_t* idx, std::int64_t n, std::int64_t d) {
  kernel::parallel(d, 64, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t i = 0; i < n; ++i)
      if (idx[i] >= 0)
        for (std::int64_t c = c0; c < c1; ++c) out[idx[i] * d + c] += src[i * d + c];
  });
}

// dst[i] = table[idx[i]] (a zero row where idx[i] is -1), or added to dst[i] when `add`.
template <class T>
void gather(T* dst, const T* table, const std::int32_t* idx, std::int64_t n, std::int64_t d, bool add) {
  kernel::parallel(n, std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(d, 1)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      T* y = dst + i * d;
      if (add) {
        if (idx[i] >= 0)
          for (std::int64_t c = 0; c < d; ++c) y[c] += table[idx[i] * d + c];
      } else if (idx[i] >= 0) {
        std::copy_n(table + idx[i] * d, d, y);
      } else {
        std::fill_n(y, d, T(0));
      }
    }
  });
}

}  // namespace

template <class T>
void TopKIndicesOp::forward(const OpArgs& a) {
  const std::int64_t N = a.in[0].size(-1), k = a.out.size(-1), rows = a.out.numel / std::max<std::int64_t>(k, 1);
  const T* x = a.in[0].as<T>();
  std::int32_t* out = a.out.as<std::int32_t>();
  // a before b: larger, or equal and earlier; a NaN is below every number.
  auto before = [](T va, std::int32_t ia, T vb, std::int32_t ib) {
    if (std::isnan(va) || std::isnan(vb)) return std::isnan(vb) && (!std::isnan(va) || ia < ib);
    return va > vb || (va == vb && ia < ib);
  };
  kernel::parallel(rows, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(N, 1)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T* xr = x + r * N;
      std::int32_t* o = out + r * k;
      // Insertion into the k best so far (k is small: a router's 1 or 2 of a few experts).
      std::int64_t have = 0;
      for (std::int32_t i = 0; i < std::int32_t(N); ++i) {
        std::int64_t at = have;
        while (at > 0 && before(xr[i], i, xr[o[at - 1]], o[at - 1])) --at;
        if (at >= k) continue;
        for (std::int64_t j = std::min(have, k - 1); j > at; --j) o[j] = o[j - 1];
        o[at] = i;
        have = std::min(have + 1, k);
      }
    }
  });
}

template <class T>
void TakeAlongLastOp::forward(const OpArgs& a) {
  const std::int64_t N = a.in[0].size(-1), k = a.out.size(-1), rows = a.out.numel / std::max<std::int64_t>(k, 1);
  const T* x = a.in[0].as<T>();
  const std::int32_t* idx = a.in[1].as<std::int32_t>();
  T* y = a.out.as<T>();
  kernel::parallel(rows, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(k, 1)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r)
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int32_t i = idx[r * k + j];
        check_index(name, r, i, 0, N);
        y[r * k + j] = x[r * N + i];
      }
  });
}

template <class T>
void TakeAlongLastOp::vjp(const OpArgs& a) {
  T* gx = a.gin[0].as<T>();
  if (!gx) return;
  const std::int64_t N = a.in[0].size(-1), k = a.out.size(-1), rows = a.out.numel / std::max<std::int64_t>(k, 1);
  const std::int32_t* idx = a.in[1].as<std::int32_t>();
  const T* g = a.gout->as<T>();
  // Rows in parallel, a row's picks in order.
  kernel::parallel(rows, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(k, 1)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r)
      for (std::int64_t j = 0; j < k; ++j) gx[r * N + idx[r * k + j]] += g[r * k + j];
  });
}

template <class T>
void ScatterAddRowsOp::forward(const OpArgs& a) {
  const std::int64_t n = a.in[0].size(0), d = a.in[0].size(1), rows = a.out.size(0);
  const T* src = a.in[0].as<T>();
  const std::int32_t* idx = a.in[1].as<std::int32_t>();
  T* out = a.out.as<T>();
  for (std::int64_t i = 0; i < n; ++i) check_index(name, i, idx[i], -1, rows);
  std::fill_n(out, rows * d, T(0));
  scatter_add(out, src, idx, n, d);
}

template <class T>
void ScatterAddRowsOp::vjp(const OpArgs& a) {
  T* gs = a.gin[0].as<T>();
  if (!gs) return;
  const std::int64_t n = a.in[0].size(0), d = a.in[0].size(1);
  const std::int32_t* idx = a.in[1].as<std::int32_t>();
  const T* g = a.gout->as<T>();
  gather(gs, g, idx, n, d, !a.assign(0));
}

template <class T>
void GatherRowsOp::forward(const OpArgs& a) {
  const std::int64_t R = a.in[0].size(0), d = a.in[0].size(1), n = a.in[1].numel;
  const T* table = a.in[0].as<T>();
  const std::int32_t* idx = a.in[1].as<std::int32_t>();
  T* y = a.out.as<T>();
  for (std::int64_t i = 0; i < n; ++i) check_index(name, i, idx[i], -1, R);
  gather(y, table, idx, n, d, false);
}

template <class T>
void GatherRowsOp::vjp(const OpArgs& a) {
  T* gt = a.gin[0].as<T>();
  if (!gt) return;
  const std::int64_t d = a.in[0].size(1), n = a.in[1].numel;
  const std::int32_t* idx = a.in[1].as<std::int32_t>();
  const T* g = a.gout->as<T>();
  scatter_add(gt, g, idx, n, d);
}

template <class T>
void ExpertSourcesOp::forward(const OpArgs& a) {
  const std::int64_t N = a.in[0].size(0), k = a.in[0].size(1), E = a.attrs<ExpertSourcesOp>().experts, C = a.out.numel / E;
  const std::int32_t* idx = a.in[0].as<std::int32_t>();
  std::int32_t* src = a.out.as<std::int32_t>();
  std::fill_n(src, a.out.numel, -1);
  // Serial: a slot depends on every choice before it (N k steps, nothing beside the experts' FFNs).
  std::array<std::int64_t, kMaxExperts> taken{};
  for (std::int64_t j = 0; j < k; ++j)
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int32_t e = idx[n * k + j];
      check_index(name, n, e, 0, E);
      std::int64_t& t = taken[std::size_t(e)];
      if (t < C) src[e * C + t++] = std::int32_t(n);
    }
}

template <class T>
void ExpertSlotsOp::forward(const OpArgs& a) {
  const std::int64_t N = a.in[0].size(0), k = a.in[0].size(1), R = a.in[1].numel, E = a.attrs<ExpertSlotsOp>().experts;
  if (R % E) throw std::invalid_argument("ctgrad: op expert_slots: " + std::to_string(R) + " sources are not a multiple of " + std::to_string(E) + " experts");
  const std::int64_t C = R / E;
  const std::int32_t *idx = a.in[0].as<std::int32_t>(), *src = a.in[1].as<std::int32_t>();
  std::int32_t* slot = a.out.as<std::int32_t>();
  std::fill_n(slot, N * k, -1);
  for (std::int64_t s = 0; s < R; ++s) {
    const std::int32_t n = src[s];
    if (n < 0) continue;
    check_index(name, s, n, 0, N);
    std::int64_t j = 0;  // (a token choosing an expert twice took its slots there in order of j)
    while (j < k && (idx[n * k + j] != s / C || slot[n * k + j] >= 0)) ++j;
    if (j == k)
      throw std::invalid_argument("ctgrad: op expert_slots: slot " + std::to_string(s) + " holds token " + std::to_string(n) +
                                  ", which did not choose expert " + std::to_string(s / C) + " (or took it twice)");
    slot[n * k + j] = std::int32_t(s);
  }
}

template <class T>
void OneHotOp::forward(const OpArgs& a) {
  const std::int64_t n = a.in[0].numel, D = a.out.size(-1);
  const std::int32_t* idx = a.in[0].as<std::int32_t>();
  T* y = a.out.as<T>();
  std::fill_n(y, n * D, T(0));
  for (std::int64_t i = 0; i < n; ++i) {
    check_index(name, i, idx[i], -1, D);
    if (idx[i] >= 0) y[i * D + idx[i]] = T(1);
  }
}

template <class T>
void NegativeMaskOp::forward(const OpArgs& a) {
  const std::int32_t* idx = a.in[0].as<std::int32_t>();
  T* y = a.out.as<T>();
  for (std::int64_t i = 0; i < a.out.numel; ++i) y[i] = idx[i] < 0 ? T(1) : T(0);
}

template void TopKIndicesOp::forward<float>(const OpArgs&);
template void TopKIndicesOp::forward<double>(const OpArgs&);
CTGRAD_INSTANTIATE_OP(TakeAlongLastOp)
CTGRAD_INSTANTIATE_OP(ScatterAddRowsOp)
CTGRAD_INSTANTIATE_OP(GatherRowsOp)
template void ExpertSourcesOp::forward<float>(const OpArgs&);
template void ExpertSourcesOp::forward<double>(const OpArgs&);
template void ExpertSlotsOp::forward<float>(const OpArgs&);
template void ExpertSlotsOp::forward<double>(const OpArgs&);
template void OneHotOp::forward<float>(const OpArgs&);
template void OneHotOp::forward<double>(const OpArgs&);
template void NegativeMaskOp::forward<float>(const OpArgs&);
template void NegativeMaskOp::forward<double>(const OpArgs&);

}  // namespace ctgrad
