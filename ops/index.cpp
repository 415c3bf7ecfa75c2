#include <ctgrad/ops/index.hpp>
#include <ctgrad/graph/tensor.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

#include <stdexcept>
#include <string>

namespace ctgrad {
namespace {

std::size_t elem_size(const TensorRef& t, std::size_t real_size) { return t.dtype == DType::index ? 4 : real_size; }

std::array<int, kMaxRank> perm_of(const OpArgs& a) { return a.attrs<PermuteOp>().axes; }

// (outer, axis length, inner) of a tensor around an axis.
struct Around {
  std::int64_t outer = 1, len = 1, inner = 1;
};
Around around(const TensorRef& t, int ax) {
  Around r;
  for (int i = 0; i < ax; ++i) r.outer *= t.dim[std::size_t(i)];
  r.len = t.dim[std::size_t(ax)];
  for (int i = ax + 1; i < t.rank; ++i) r.inner *= t.dim[std::size_t(i)];
  return r;
}

template <class U>
void copy_or_add(U* dst, const U* src, std::int64_t n, bool add) {
  if (add)
    for (std::int64_t i = 0; i < n; ++i) dst[i] += src[i];
  else
    std::memcpy(dst, src, std::size_t(n) * sizeof(U));
}

}  // namespace

template <class T>
void PermuteOp::forward(const OpArgs& a) {
  if (a.in[0].dtype == DType::index)
    kernel::permute_copy<std::int32_t, false>(a.in[0].as<std::int32_t>(), a.out.as<std::int32_t>(), a.in[0], perm_of(a));
  else
    kernel::permute_copy<T, false>(a.in[0].as<T>(), a.out.as<T>(), a.in[0], perm_of(a));
}
template <class T>
void PermuteOp::vjp(const OpArgs& a) {
  const auto p = perm_of(a);
  std::array<int, kMaxRank> inv{};
  for (int i = 0; i < a.out.rank; ++i) inv[std::size_t(p[std::size_t(i)])] = i;
  if (a.assign(0))
    kernel::permute_copy<T, false>(a.gout->as<T>(), a.gin[0].as<T>(), a.out, inv);
  else
    kernel::permute_copy<T, true>(a.gout->as<T>(), a.gin[0].as<T>(), a.out, inv);
}

template <class T>
void ConcatOp::forward(const OpArgs& a) {
  const int ax = ops::norm_axis(a.attrs<ConcatOp>().axis, a.out.rank);
  const Around o = around(a.out, ax);
  const std::size_t es = elem_size(a.out, sizeof(T));
  auto* out = static_cast<char*>(a.out.data);
  kernel::parallel(o.outer, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      std::int64_t at = 0;
      for (int k = 0; k < a.n_in; ++k) {
        const std::int64_t chunk = around(a.in[k], ax).len * o.inner;
        std::memcpy(out + std::size_t((r * o.len * o.inner + at) * std::int64_t(es)),
                    static_cast<const char*>(a.in[k].data) + std::size_t(r * chunk * std::int64_t(es)), std::size_t(chunk) * es);
        at += chunk;
      }
    }
  });
}
template <class T>
void ConcatOp::vjp(const OpArgs& a) {
  const int ax = ops::norm_axis(a.attrs<ConcatOp>().axis, a.out.rank);
  const Around o = around(a.out, ax);
  const T* g = a.gout->as<T>();
  kernel::parallel(o.outer, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      std::int64_t at = 0;
      for (int k = 0; k < a.n_in; ++k) {
        const std::int64_t chunk = around(a.in[k], ax).len * o.inner;
        if (T* gk = a.gin[k].as<T>()) copy_or_add(gk + r * chunk, g + r * o.len * o.inner + at, chunk, !a.assign(k));
        at += chunk;
      }
    }
  });
}

template <class T>
void SliceOp::forward(const OpArgs& a) {
  const int ax = ops::norm_axis(a.attrs<SliceOp>().axis, a.in[0].rank);
  const Around x = around(a.in[0], ax);
  const std::int64_t start = a.attrs<SliceOp>().start, len = a.attrs<SliceOp>().length;
  if (start + len > x.len)
    throw shape_error("ctgrad: op slice: range [" + std::to_string(start) + ", " + std::to_string(start + len) +
                      ") does not fit dim " + std::to_string(ax) + " of size " + std::to_string(x.len));
  const std::size_t es = elem_size(a.out, sizeof(T));
  kernel::parallel(x.outer, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r)
      std::memcpy(static_cast<char*>(a.out.data) + std::size_t(r * len * x.inner) * es,
                  static_cast<const char*>(a.in[0].data) + std::size_t((r * x.len + start) * x.inner) * es,
                  std::size_t(len * x.inner) * es);
  });
}
template <class T>
void SliceOp::vjp(const OpArgs& a) {
  const int ax = ops::norm_axis(a.attrs<SliceOp>().axis, a.in[0].rank);
  const Around x = around(a.in[0], ax);
  const std::int64_t start = a.attrs<SliceOp>().start, len = a.attrs<SliceOp>().length;
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const bool assign = a.assign(0);  // then the rows outside the slice get zeros
  kernel::parallel(x.outer, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      T* row = gx + r * x.len * x.inner;
      if (assign) {
        std::fill(row, row + start * x.inner, T(0));
        std::fill(row + (start + len) * x.inner, row + x.len * x.inner, T(0));
      }
      copy_or_add(row + start * x.inner, g + r * len * x.inner, len * x.inner, !assign);
    }
  });
}

namespace {
void check_indices(const char* op, const std::int32_t* idx, std::int64_t n, std::int64_t limit, const char* what) {
  for (std::int64_t j = 0; j < n; ++j)
    if (idx[j] < 0 || idx[j] >= limit)
      throw std::out_of_range(std::string("ctgrad: op ") + op + ": " + what + " " + std::to_string(idx[j]) +
                              " at position " + std::to_string(j) + " is outside [0, " + std::to_string(limit) + ")");
}
}  // namespace

template <class T>
void IndexSelectOp::forward(const OpArgs& a) {
  const int ax = ops::norm_axis(a.attrs<IndexSelectOp>().axis, a.in[0].rank);
  const Around x = around(a.in[0], ax);
  const std::int32_t* idx = a.in[1].as<std::int32_t>();
  const std::int64_t n = a.in[1].numel;
  check_indices("index_select", idx, n, x.len, "index");
  const std::size_t es = elem_size(a.out, sizeof(T));
  kernel::parallel(x.outer * n, std::max<std::int64_t>(1, 4096 / x.inner), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t q = b; q < e; ++q) {
      const std::int64_t r = q / n, j = q % n;
      std::memcpy(static_cast<char*>(a.out.data) + std::size_t(q * x.inner) * es,
                  static_cast<const char*>(a.in[0].data) + std::size_t((r * x.len + idx[j]) * x.inner) * es,
                  std::size_t(x.inner) * es);
    }
  });
}
template <class T>
void IndexSelectOp::vjp(const OpArgs& a) {
  const int ax = ops::norm_axis(a.attrs<IndexSelectOp>().axis, a.in[0].rank);
  const Around x = around(a.in[0], ax);
  const std::int32_t* idx = a.in[1].as<std::int32_t>();
  const std::int64_t n = a.in[1].numel;
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  // Repeated indices add into the same row: indices in order within each outer slice.
  kernel::parallel(x.outer, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r)
      for (std::int64_t j = 0; j < n; ++j) copy_or_add(gx + (r * x.len + idx[j]) * x.inner, g + (r * n + j) * x.inner, x.inner, true);
  });
}

template <class T>
void EmbeddingOp::forward(const OpArgs& a) {
  const std::int64_t V = a.in[0].size(0), D = a.in[0].size(1), n = a.in[1].numel;
  const T* table = a.in[0].as<T>();
  const std::int32_t* ids = a.in[1].as<std::int32_t>();
  check_indices("embedding", ids, n, V, "id");
  T* y = a.out.as<T>();
  kernel::parallel(n, std::max<std::int64_t>(1, 8192 / D), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) std::memcpy(y + i * D, table + ids[i] * D, std::size_t(D) * sizeof(T));
  });
}
template <class T>
void EmbeddingOp::vjp(const OpArgs& a) {
  const std::int64_t D = a.in[0].size(1), n = a.in[1].numel;
  const std::int32_t* ids = a.in[1].as<std::int32_t>();
  const T* g = a.gout->as<T>();
  T* gt = a.gin[0].as<T>();
  if (!gt) return;
  // Columns in parallel; within a column block, ids in order: repeated ids add deterministically.
  kernel::parallel(D, 64, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t c = c0; c < c1; ++c) gt[ids[i] * D + c] += g[i * D + c];
  });
}

template <class T>
void OverwriteTailOp::forward(const OpArgs& a) {
  const int ax = ops::norm_axis(a.attrs<OverwriteTailOp>().axis, a.in[0].rank);
  const Around x = around(a.in[0], ax), t = around(a.in[1], ax);
  if (t.len > x.len)
    throw shape_error("ctgrad: op overwrite_tail: tail of " + std::to_string(t.len) + " along axis " + std::to_string(ax) +
                      " is longer than x's " + std::to_string(x.len));
  const std::size_t es = elem_size(a.out, sizeof(T));
  const std::int64_t keep = x.len - t.len;
  char* out = static_cast<char*>(a.out.data);
  const char *src = static_cast<const char*>(a.in[0].data), *tail = static_cast<const char*>(a.in[1].data);
  kernel::parallel(x.outer, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      std::memcpy(out + std::size_t(r * x.len * x.inner) * es, src + std::size_t(r * x.len * x.inner) * es, std::size_t(keep * x.inner) * es);
      std::memcpy(out + std::size_t((r * x.len + keep) * x.inner) * es, tail + std::size_t(r * t.len * t.inner) * es,
                  std::size_t(t.len * t.inner) * es);
    }
  });
}
template <class T>
void OverwriteTailOp::vjp(const OpArgs& a) {
  const int ax = ops::norm_axis(a.attrs<OverwriteTailOp>().axis, a.in[0].rank);
  const Around x = around(a.in[0], ax), t = around(a.in[1], ax);
  const std::int64_t keep = x.len - t.len;
  const T* g = a.gout->as<T>();
  kernel::parallel(x.outer, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      if (a.gin[0].data) copy_or_add(a.gin[0].as<T>() + r * x.len * x.inner, g + r * x.len * x.inner, keep * x.inner, true);
      if (a.gin[1].data) copy_or_add(a.gin[1].as<T>() + r * t.len * t.inner, g + (r * x.len + keep) * x.inner, t.len * t.inner, true);
    }
  });
}

CTGRAD_INSTANTIATE_OP(PermuteOp)
CTGRAD_INSTANTIATE_OP(ConcatOp)
CTGRAD_INSTANTIATE_OP(SliceOp)
CTGRAD_INSTANTIATE_OP(OverwriteTailOp)
CTGRAD_INSTANTIATE_OP(IndexSelectOp)
CTGRAD_INSTANTIATE_OP(EmbeddingOp)

}  // namespace ctgrad
