#include <ctgrad/ops/shape.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

namespace ctgrad {
namespace {

// dst (+)= src with axes a and b of src swapped; `src` has dims `sd`.
template <class T, bool Accumulate>
void swap_axes(const T* src, T* dst, const TensorRef& sref, int a, int b) {
  const int rank = sref.rank;
  std::array<std::int64_t, kMaxRank> sstride{}, dd = sref.dim;
  std::int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) sstride[static_cast<std::size_t>(i)] = s, s *= sref.dim[static_cast<std::size_t>(i)];
  std::swap(dd[static_cast<std::size_t>(a)], dd[static_cast<std::size_t>(b)]);
  auto ss = sstride;
  std::swap(ss[static_cast<std::size_t>(a)], ss[static_cast<std::size_t>(b)]);  // src stride per dst axis
  const std::int64_t inner = dd[static_cast<std::size_t>(rank - 1)], istride = ss[static_cast<std::size_t>(rank - 1)];
  const std::int64_t rows = sref.numel / inner;
  kernel::parallel(rows, std::max<std::int64_t>(1, kernel::grain_for() / inner), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t off = 0, q = r;
      for (int i = rank - 2; i >= 0; --i) {
        auto iu = static_cast<std::size_t>(i);
        off += (q % dd[iu]) * ss[iu];
        q /= dd[iu];
      }
      T* d = dst + r * inner;
      for (std::int64_t j = 0; j < inner; ++j) {
        if constexpr (Accumulate)
          d[j] += src[off + j * istride];
        else
          d[j] = src[off + j * istride];
      }
    }
  });
}

}  // namespace

template <class T>
void ReshapeOp::forward(const OpArgs& a) {
  std::size_t bytes = static_cast<std::size_t>(a.out.numel) * (a.out.dtype == DType::index ? 4 : sizeof(T));
  std::memcpy(a.out.data, a.in[0].data, bytes);
}
template <class T>
void ReshapeOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  kernel::parallel(a.out.numel, kernel::grain_for(), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) gx[i] += g[i];
  });
}

template <class T>
void TransposeOp::forward(const OpArgs& a) {
  int x = ops::norm_axis(a.attr.i[0], a.in[0].rank), y = ops::norm_axis(a.attr.i[1], a.in[0].rank);
  if (a.in[0].dtype == DType::index)
    swap_axes<std::int32_t, false>(a.in[0].as<std::int32_t>(), a.out.as<std::int32_t>(), a.in[0], x, y);
  else
    swap_axes<T, false>(a.in[0].as<T>(), a.out.as<T>(), a.in[0], x, y);
}
template <class T>
void TransposeOp::vjp(const OpArgs& a) {
  int x = ops::norm_axis(a.attr.i[0], a.in[0].rank), y = ops::norm_axis(a.attr.i[1], a.in[0].rank);
  swap_axes<T, true>(a.gout->as<T>(), a.gin[0].as<T>(), a.out, x, y);
}

CTGRAD_INSTANTIATE_OP(ReshapeOp)
CTGRAD_INSTANTIATE_OP(TransposeOp)

}  // namespace ctgrad
