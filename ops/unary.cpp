#include <ctgrad/ops/unary.hpp>
#include <ctgrad/ops/detail/kernel.hpp>


namespace ctgrad {
namespace {

template <class F, class T>
void run_unary(const OpArgs& a, const simd::Table& t, std::int64_t grain) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  const auto f = t.unary[F::id][std::is_same_v<T, double>];
  const double param = a.attrs<UnaryOp<F>>().param;
  kernel::parallel(a.out.numel, grain, [&](std::int64_t b, std::int64_t e) { f(x + b, y + b, e - b, param); });
}

}  // namespace

template <class F>
template <class T>
void UnaryOp<F>::forward(const OpArgs& a) {
  run_unary<F, T>(a, simd::best(), kernel::grain_for(8));
}

template <class F>
template <class T>
void UnaryOp<F>::reference_forward(const OpArgs& a) {
  run_unary<F, T>(a, *simd::table("scalar"), a.out.numel + 1);
}

template <class F>
template <class T>
void UnaryOp<F>::vjp(const OpArgs& a) {
  // Only what `saves` declares may be read: the kernel gets null for the other.
  const T* x = (F::saves & kSaveInput(0)) ? a.in[0].as<T>() : nullptr;
  const T* y = (F::saves & kSaveOutput) ? a.out.as<T>() : nullptr;
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const auto d = simd::best().unary_vjp[F::id][std::is_same_v<T, double>];
  const double param = a.attrs<UnaryOp<F>>().param;
  kernel::parallel(a.out.numel, kernel::grain_for(8), [&](std::int64_t b, std::int64_t e) {
    d(x ? x + b : nullptr, y ? y + b : nullptr, g + b, gx + b, e - b, param, a.assign(0));
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
CTGRAD_INSTANTIATE_UNARY(ReluSquared)
CTGRAD_INSTANTIATE_UNARY(Softplus)
CTGRAD_INSTANTIATE_UNARY(Shift)

}  // namespace ctgrad
