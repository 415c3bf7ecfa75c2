#include <ctgrad/ops/mask.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

#include <stdexcept>
#include <string>

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
  const T v = static_cast<T>(a.attrs<MaskedFillOp>().value);
  for_each_masked<T>(a, [&](std::int64_t i, bool keep) { y[i] = keep ? x[i] : v; });
}

template <class T>
void MaskedFillOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  if (gx) for_each_masked<T>(a, [&](std::int64_t i, bool keep) { gx[i] += keep ? g[i] : T(0); });
}

template <class T>
void CausalMaskOp::forward(const OpArgs& a) {
  const std::int64_t tq = a.out.size(0), tk = a.out.size(1), shift = tk - tq;
  const std::int64_t w = a.attrs<CausalMaskOp>().window;
  std::int32_t* m = a.out.as<std::int32_t>();
  kernel::parallel(tq, std::max<std::int64_t>(1, 16384 / tk), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i)
      for (std::int64_t j = 0; j < tk; ++j) m[i * tk + j] = j <= i + shift && (w == 0 || j > i + shift - w) ? 1 : 0;
  });
}

template <class T>
void KeyPaddingMaskOp::forward(const OpArgs& a) {
  const std::int64_t B = a.out.size(0), n = a.out.size(-1);
  const std::int32_t* len = a.in[0].as<std::int32_t>();
  std::int32_t* m = a.out.as<std::int32_t>();
  for (std::int64_t b = 0; b < B; ++b) {
    if (len[b] < 0 || len[b] > n)
      throw std::out_of_range("ctgrad: op key_padding_mask: length " + std::to_string(len[b]) + " of sequence " +
                              std::to_string(b) + " is outside [0, " + std::to_string(n) + "]");
    for (std::int64_t j = 0; j < n; ++j) m[b * n + j] = j < len[b] ? 1 : 0;

  }
}

CTGRAD_INSTANTIATE_OP(MaskedFillOp)
template void CausalMaskOp::forward<float>(const OpArgs&);
template void CausalMaskOp::forward<double>(const OpArgs&);
template void KeyPaddingMaskOp::forward<float>(const OpArgs&);
template void KeyPaddingMaskOp::forward<double>(const OpArgs&);

}  // namespace ctgrad
