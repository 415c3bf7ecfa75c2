#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/shared_gradient.hpp>
#include <ctgrad/ops/detail/simd.hpp>

#include <stdexcept>

namespace ctgrad {
namespace {

// out = f(a, b) with broadcasting; equal shapes go through the SIMD table's kernel `op`. The
// reference (the scalar table) takes the general broadcast path for every broadcast.
template <class T, class F>
void binary(const OpArgs& a, F f, int op, const simd::Table& table = simd::best()) {
  const bool reference = &table != &simd::best();
  const TensorRef &x = a.in[0], &y = a.in[1], &o = a.out;
  const T *px = x.as<T>(), *py = y.as<T>();
  T* po = o.as<T>();
  if (kernel::same_dims(x, o) && kernel::same_dims(y, o)) {
    const auto k = table.binary[op][std::is_same_v<T, double>];
    kernel::parallel(o.numel, kernel::grain_for(), [&](std::int64_t b, std::int64_t e) { k(px + b, py + b, po + b, e - b); });
  } else if (kernel::same_dims(x, o) && kernel::is_suffix(y, o)) {  // e.g. adding a bias: row by row
    const std::int64_t inner = y.numel;
    const auto k = table.binary[op][std::is_same_v<T, double>];
    kernel::parallel(o.numel / inner, std::max<std::int64_t>(1, kernel::grain_for() / inner),
                     [&](std::int64_t b, std::int64_t e) {
                       for (std::int64_t r = b; r < e; ++r) k(px + r * inner, py, po + r * inner, inner);
                     });
  } else if (std::int64_t inner = 0; !reference && ((kernel::same_dims(x, o) && (inner = kernel::row_broadcast(y, o)) > 0) ||
                                                     (kernel::same_dims(y, o) && (inner = kernel::row_broadcast(x, o)) > 0))) {
    // One operand a scalar per row of `inner` elements (a gate, a mask column): row by row.
    const bool x_full = kernel::same_dims(x, o) && kernel::row_broadcast(y, o) == inner;
    kernel::parallel(o.numel / inner, std::max<std::int64_t>(1, kernel::grain_for() / inner), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        T* out = po + r * inner;
        if (x_full) {
          const T* xr = px + r * inner;
          const T v = py[r];
          for (std::int64_t j = 0; j < inner; ++j) out[j] = f(xr[j], v);
        } else {
          const T* yr = py + r * inner;
          const T v = px[r];
          for (std::int64_t j = 0; j < inner; ++j) out[j] = f(v, yr[j]);
        }
      }
    });
  } else {
    auto sx = kernel::broadcast_strides(x, o), sy = kernel::broadcast_strides(y, o);
    kernel::parallel(o.numel, kernel::grain_for(4), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) po[i] = f(px[kernel::offset_of(i, o, sx)], py[kernel::offset_of(i, o, sy)]);
    });
  }
}

}  // namespace

template <class T>
void AddOp::forward(const OpArgs& a) {
  binary<T>(a, [](T x, T y) { return x + y; }, simd::add);
}
template <class T>
void AddOp::reference_forward(const OpArgs& a) {
  binary<T>(a, [](T x, T y) { return x + y; }, simd::add, *simd::table("scalar"));
}
namespace {
// gin += alpha * g * other (other may be null), when gin has the output's shape: SIMD rows.
template <class T>
bool same_shape_axpy(const OpArgs& a, int k, double alpha, const T* other) {
  if (!kernel::same_dims(a.gin[k], a.out)) return false;
  const auto f = simd::best().axpy[std::is_same_v<T, double>];
  const T* g = a.gout->as<T>();
  T* gx = a.gin[k].as<T>();
  kernel::parallel(a.out.numel, kernel::grain_for(), [&](std::int64_t b, std::int64_t e) {
    f(g + b, other ? other + b : nullptr, gx + b, e - b, alpha, a.assign(k));
  });
  return true;
}
}  // namespace

template <class T>
void AddOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  for (int k = 0; k < 2; ++k)
    if (a.gin[k].data && !kernel::shared_gradient(a, k) && !same_shape_axpy<T>(a, k, 1.0, nullptr))
      kernel::reduce_broadcast<T>(a.gin[k], a.out, [&](std::int64_t i) { return g[i]; }, a.assign(k));
}

template <class T>
void SubOp::forward(const OpArgs& a) {
  binary<T>(a, [](T x, T y) { return x - y; }, simd::sub);
}
template <class T>
void SubOp::reference_forward(const OpArgs& a) {
  binary<T>(a, [](T x, T y) { return x - y; }, simd::sub, *simd::table("scalar"));
}
template <class T>
void SubOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  if (a.gin[0].data && !kernel::shared_gradient(a, 0) && !same_shape_axpy<T>(a, 0, 1.0, nullptr))
    kernel::reduce_broadcast<T>(a.gin[0], a.out, [&](std::int64_t i) { return g[i]; }, a.assign(0));
  if (a.gin[1].data && !same_shape_axpy<T>(a, 1, -1.0, nullptr))
    kernel::reduce_broadcast<T>(a.gin[1], a.out, [&](std::int64_t i) { return -g[i]; }, a.assign(1));
}

template <class T>
void MulOp::forward(const OpArgs& a) {
  binary<T>(a, [](T x, T y) { return x * y; }, simd::mul);
}
template <class T>
void MulOp::reference_forward(const OpArgs& a) {
  binary<T>(a, [](T x, T y) { return x * y; }, simd::mul, *simd::table("scalar"));
}
template <class T>
void MulOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  // Each input's gradient in its own pass: gin[0] and gin[1] alias when a value is squared.
  for (int k = 0; k < 2; ++k) {
    if (!a.gin[k].data) continue;
    const TensorRef& other = a.in[1 - k];
    const T* po = other.as<T>();
    if (kernel::same_dims(other, a.out) && same_shape_axpy<T>(a, k, 1.0, po)) continue;
    if (const std::int64_t inner = kernel::row_broadcast(other, a.out); inner > 1 && kernel::same_dims(a.gin[k], a.out)) {
      // gin = g times a per-row scalar: row by row.
      T* gx = a.gin[k].as<T>();
      const bool assign = a.assign(k);
      kernel::parallel(a.out.numel / inner, std::max<std::int64_t>(1, kernel::grain_for() / inner), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t r = b; r < e; ++r) {
          const T v = po[r];
          const T* gr = g + r * inner;
          T* d = gx + r * inner;
          if (assign)
            for (std::int64_t j = 0; j < inner; ++j) d[j] = gr[j] * v;
          else
            for (std::int64_t j = 0; j < inner; ++j) d[j] += gr[j] * v;
        }
      });
      continue;
    }
    if (kernel::same_dims(other, a.out)) {
      kernel::reduce_broadcast<T>(a.gin[k], a.out, [&](std::int64_t i) { return g[i] * po[i]; }, a.assign(k));
    } else {
      auto so = kernel::broadcast_strides(other, a.out);
      kernel::reduce_broadcast<T>(
          a.gin[k], a.out, [&](std::int64_t i) { return g[i] * po[kernel::offset_of(i, a.out, so)]; }, a.assign(k));
    }
  }
}

template <class T>
void DivOp::forward(const OpArgs& a) {
  binary<T>(a, [](T x, T y) { return x / y; }, simd::div);
}
template <class T>
void DivOp::reference_forward(const OpArgs& a) {
  binary<T>(a, [](T x, T y) { return x / y; }, simd::div, *simd::table("scalar"));
}
template <class T>
void DivOp::vjp(const OpArgs& a) {
  const T *g = a.gout->as<T>(), *px = a.in[0].as<T>(), *py = a.in[1].as<T>();
  auto sx = kernel::broadcast_strides(a.in[0], a.out), sy = kernel::broadcast_strides(a.in[1], a.out);
  auto x_at = [&](std::int64_t i) { return px[kernel::offset_of(i, a.out, sx)]; };
  auto y_at = [&](std::int64_t i) { return py[kernel::offset_of(i, a.out, sy)]; };
  if (a.gin[0].data) kernel::reduce_broadcast<T>(a.gin[0], a.out, [&](std::int64_t i) { return g[i] / y_at(i); }, a.assign(0));
  if (a.gin[1].data)
    kernel::reduce_broadcast<T>(
        a.gin[1], a.out,
        [&](std::int64_t i) {
          const T y = y_at(i);
          return -g[i] * x_at(i) / (y * y);
        },
        a.assign(1));
}

namespace {
template <class T>
void unary_table(const OpArgs& a, int f, double p, const simd::Table& t, std::int64_t grain) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  const auto k = t.unary[f][std::is_same_v<T, double>];
  kernel::parallel(a.out.numel, grain, [&](std::int64_t b, std::int64_t e) { k(x + b, y + b, e - b, p); });
}
template <class T>
void unary_table_vjp(const OpArgs& a, int f, double p, const T* x, const T* y) {
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const auto d = simd::best().unary_vjp[f][std::is_same_v<T, double>];
  kernel::parallel(a.out.numel, kernel::grain_for(), [&](std::int64_t b, std::int64_t e) {
    d(x ? x + b : nullptr, y ? y + b : nullptr, g + b, gx + b, e - b, p, a.assign(0));
  });
}
}  // namespace

template <class T>
void ReluOp::forward(const OpArgs& a) {
  unary_table<T>(a, simd::relu, 0, simd::best(), kernel::grain_for());
}
template <class T>
void ReluOp::reference_forward(const OpArgs& a) {
  unary_table<T>(a, simd::relu, 0, *simd::table("scalar"), a.out.numel + 1);
}
template <class T>
void ReluOp::vjp(const OpArgs& a) {
  unary_table_vjp<T>(a, simd::relu, 0, nullptr, a.out.as<T>());
}

template <class T>
void ScaleOp::forward(const OpArgs& a) {
  unary_table<T>(a, simd::scale, double(a.attrs<ScaleOp>().factor), simd::best(), kernel::grain_for());
}
template <class T>
void ScaleOp::reference_forward(const OpArgs& a) {
  unary_table<T>(a, simd::scale, double(a.attrs<ScaleOp>().factor), *simd::table("scalar"), a.out.numel + 1);
}
template <class T>
void ScaleOp::vjp(const OpArgs& a) {
  unary_table_vjp<T>(a, simd::scale, double(a.attrs<ScaleOp>().factor), nullptr, nullptr);
}

template <class T>
void DetachOp::forward(const OpArgs& a) {
  std::size_t bytes = static_cast<std::size_t>(a.out.numel) * (a.out.dtype == DType::index ? 4 : sizeof(T));
  std::memcpy(a.out.data, a.in[0].data, bytes);
}

CTGRAD_INSTANTIATE_OP(AddOp)
#define CTGRAD_INSTANTIATE_REFERENCE(Op)                           \
  template void Op::reference_forward<float>(const OpArgs&);       \
  template void Op::reference_forward<double>(const OpArgs&);
CTGRAD_INSTANTIATE_REFERENCE(AddOp)
CTGRAD_INSTANTIATE_REFERENCE(SubOp)
CTGRAD_INSTANTIATE_REFERENCE(MulOp)
CTGRAD_INSTANTIATE_REFERENCE(DivOp)
CTGRAD_INSTANTIATE_REFERENCE(ReluOp)
CTGRAD_INSTANTIATE_REFERENCE(ScaleOp)
CTGRAD_INSTANTIATE_OP(SubOp)
CTGRAD_INSTANTIATE_OP(MulOp)
CTGRAD_INSTANTIATE_OP(DivOp)
CTGRAD_INSTANTIATE_OP(ReluOp)
CTGRAD_INSTANTIATE_OP(ScaleOp)
template void DetachOp::forward<float>(const OpArgs&);
template void DetachOp::forward<double>(const OpArgs&);

}  // namespace ctgrad
