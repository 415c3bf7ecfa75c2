#include <ctgrad/ops/mask.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

namespace ctgrad {
namespace {

template <class T, class F>
void for_each_masked(const OpArgs& a, F f) {
  const TensorRef &m = a.in[1], &o = a.out;
  auto st = kernel::broadcast_strides(m, o);
  const bool idx = m.dtype == DType::index;
  const T* mr = m.as<T>();
  const std::int32_t* mi = m.as<std::int32_t>();
  kernel::parallel(o.numel, kernel::grain_for(4), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      std::int64_t off = kernel::offset_of(i, o, st);
      f(i, idx ? mi[off] != 0 : mr[off] != T(0));
    }
  });
}

}  // namespace

template <class T>
void MaskedFillOp::forward(const OpArgs& a) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  const T v = static_cast<T>(a.attr.f[0]);
  for_each_masked<T>(a, [&](std::int64_t i, bool keep) { y[i] = keep ? x[i] : v; });
}

template <class T>
void MaskedFillOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  if (gx) for_each_masked<T>(a, [&](std::int64_t i, bool keep) { gx[i] += keep ? g[i] : T(0); });
}

CTGRAD_INSTANTIATE_OP(MaskedFillOp)

}  // namespace ctgrad
