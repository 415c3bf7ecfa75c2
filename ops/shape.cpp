#include <ctgrad/ops/shape.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

namespace ctgrad {
namespace {
// The permutation that swaps axes a and b.
std::array<int, kMaxRank> swap_of(int rank, int a, int b) {
  std::array<int, kMaxRank> p{};
  for (int i = 0; i < rank; ++i) p[std::size_t(i)] = i;
  std::swap(p[std::size_t(a)], p[std::size_t(b)]);
  return p;
}
}  // namespace

template <class T>
void ReshapeOp::forward(const OpArgs& a) {
  if (a.out.data == a.in[0].data) return;  // planned as a view (ReshapeOp::view): nothing to copy
  std::size_t bytes = static_cast<std::size_t>(a.out.numel) * (a.out.dtype == DType::index ? 4 : sizeof(T));
  std::memcpy(a.out.data, a.in[0].data, bytes);
}
template <class T>
void ReshapeOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const bool assign = a.assign(0);
  kernel::parallel(a.out.numel, kernel::grain_for(), [&](std::int64_t b, std::int64_t e) {
    if (assign)
      std::memcpy(gx + b, g + b, std::size_t(e - b) * sizeof(T));
    else
      for (std::int64_t i = b; i < e; ++i) gx[i] += g[i];
  });
}

template <class T>
void TransposeOp::forward(const OpArgs& a) {
  const TransposeOptions o = a.attrs<TransposeOp>();
  int x = ops::norm_axis(o.axis_a, a.in[0].rank), y = ops::norm_axis(o.axis_b, a.in[0].rank);
  const auto p = swap_of(a.in[0].rank, x, y);
  if (a.in[0].dtype == DType::index)
    kernel::permute_copy<std::int32_t, false>(a.in[0].as<std::int32_t>(), a.out.as<std::int32_t>(), a.in[0], p);
  else
    kernel::permute_copy<T, false>(a.in[0].as<T>(), a.out.as<T>(), a.in[0], p);
}
template <class T>
void TransposeOp::vjp(const OpArgs& a) {
  const TransposeOptions o = a.attrs<TransposeOp>();
  int x = ops::norm_axis(o.axis_a, a.in[0].rank), y = ops::norm_axis(o.axis_b, a.in[0].rank);
  const auto p = swap_of(a.out.rank, x, y);  // a swap is its own inverse
  if (a.assign(0))
    kernel::permute_copy<T, false>(a.gout->as<T>(), a.gin[0].as<T>(), a.out, p);
  else
    kernel::permute_copy<T, true>(a.gout->as<T>(), a.gin[0].as<T>(), a.out, p);
}

template <class T>
void BroadcastToOp::forward(const OpArgs& a) {
  const auto st = kernel::broadcast_strides(a.in[0], a.out);
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  kernel::parallel(a.out.numel, kernel::grain_for(4), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) y[i] = x[kernel::offset_of(i, a.out, st)];
  });
}
template <class T>
void BroadcastToOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  if (a.gin[0].data) kernel::reduce_broadcast<T>(a.gin[0], a.out, [&](std::int64_t i) { return g[i]; }, a.assign(0));
}

CTGRAD_INSTANTIATE_OP(BroadcastToOp)
CTGRAD_INSTANTIATE_OP(ReshapeOp)
CTGRAD_INSTANTIATE_OP(TransposeOp)

}  // namespace ctgrad
