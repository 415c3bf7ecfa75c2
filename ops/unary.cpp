#include <ctgrad/ops/unary.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

#include <cmath>

namespace ctgrad {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654, kInvSqrt2 = 0.7071067811865476, kInvSqrt2Pi = 0.3989422804014327;

// Value and derivative of each function; `p` is attr.f[0] (the exponent of pow).
template <class F, class T>
struct Fn;
template <class T> struct Fn<unary::Neg, T> {
  static T f(T x, T) { return -x; }
  static T df(T, T, T) { return T(-1); }
};
template <class T> struct Fn<unary::Exp, T> {
  static T f(T x, T) { return std::exp(x); }
  static T df(T, T y, T) { return y; }
};
template <class T> struct Fn<unary::Log, T> {
  static T f(T x, T) { return std::log(x); }
  static T df(T x, T, T) { return T(1) / x; }
};
template <class T> struct Fn<unary::Sqrt, T> {
  static T f(T x, T) { return std::sqrt(x); }
  static T df(T, T y, T) { return T(0.5) / y; }
};
template <class T> struct Fn<unary::Rsqrt, T> {
  static T f(T x, T) { return T(1) / std::sqrt(x); }
  static T df(T, T y, T) { return T(-0.5) * y * y * y; }
};
template <class T> struct Fn<unary::Tanh, T> {
  static T f(T x, T) { return std::tanh(x); }
  static T df(T, T y, T) { return T(1) - y * y; }
};
template <class T> struct Fn<unary::Sigmoid, T> {
  static T f(T x, T) { return T(1) / (T(1) + std::exp(-x)); }
  static T df(T, T y, T) { return y * (T(1) - y); }
};
template <class T> struct Fn<unary::Silu, T> {
  static T f(T x, T) { return x / (T(1) + std::exp(-x)); }
  static T df(T x, T, T) {
    const T s = T(1) / (T(1) + std::exp(-x));
    return s * (T(1) + x * (T(1) - s));
  }
};
template <class T> struct Fn<unary::Gelu, T> {
  static T f(T x, T) { return T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2))); }
  static T df(T x, T, T) { return T(0.5) * (T(1) + std::erf(x * T(kInvSqrt2))) + x * T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x); }
};
template <class T> struct Fn<unary::GeluTanh, T> {
  static T f(T x, T) { return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x))); }
  static T df(T x, T, T) {
    const T u = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x), t = std::tanh(u);
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
  }
};
template <class T> struct Fn<unary::Pow, T> {
  static T f(T x, T p) { return std::pow(x, p); }
  static T df(T x, T, T p) { return p * std::pow(x, p - T(1)); }
};

}  // namespace

template <class F>
template <class T>
void UnaryOp<F>::forward(const OpArgs& a) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  const T p = static_cast<T>(a.attr.f[0]);
  kernel::parallel(a.out.numel, kernel::grain_for(8), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) y[i] = Fn<F, T>::f(x[i], p);
  });
}

template <class F>
template <class T>
void UnaryOp<F>::reference_forward(const OpArgs& a) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  for (std::int64_t i = 0; i < a.out.numel; ++i) y[i] = Fn<F, T>::f(x[i], static_cast<T>(a.attr.f[0]));
}

template <class F>
template <class T>
void UnaryOp<F>::vjp(const OpArgs& a) {
  const T *x = a.in[0].as<T>(), *y = a.out.as<T>(), *g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const T p = static_cast<T>(a.attr.f[0]);
  // Only what `saves` declares may be read: the other pointer is passed but not dereferenced.
  constexpr bool use_x = (F::saves & kSaveInput(0)) != 0, use_y = (F::saves & kSaveOutput) != 0;
  kernel::parallel(a.out.numel, kernel::grain_for(8), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i)
      gx[i] += g[i] * Fn<F, T>::df(use_x ? x[i] : T(0), use_y ? y[i] : T(0), p);
  });
}

#define CTGRAD_INSTANTIATE_UNARY(F)                                          \
  CTGRAD_INSTANTIATE_OP(UnaryOp<unary::F>)                                   \
  template void UnaryOp<unary::F>::reference_forward<float>(const OpArgs&);  \
  template void UnaryOp<unary::F>::reference_forward<double>(const OpArgs&);
CTGRAD_INSTANTIATE_UNARY(Neg)
CTGRAD_INSTANTIATE_UNARY(Exp)
CTGRAD_INSTANTIATE_UNARY(Log)
CTGRAD_INSTANTIATE_UNARY(Sqrt)
CTGRAD_INSTANTIATE_UNARY(Rsqrt)
CTGRAD_INSTANTIATE_UNARY(Tanh)
CTGRAD_INSTANTIATE_UNARY(Sigmoid)
CTGRAD_INSTANTIATE_UNARY(Silu)
CTGRAD_INSTANTIATE_UNARY(Gelu)
CTGRAD_INSTANTIATE_UNARY(GeluTanh)
CTGRAD_INSTANTIATE_UNARY(Pow)

}  // namespace ctgrad
