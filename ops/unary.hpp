// Unary elementwise ops: y = f(x), dx += g * f'(x). Each function is a small struct (value and
// derivative, from x and/or y); UnaryOp<F> turns it into an op.
#pragma once
#include <ctgrad/ops/common.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/detail/simd.hpp>

namespace ctgrad {

namespace unary {
// `saves`: what the derivative needs (kSaveInput(0) for x, kSaveOutput for y).
struct Neg { static constexpr int id = simd::neg; static constexpr const char* name = "neg"; static constexpr unsigned saves = 0; };
struct Exp { static constexpr int id = simd::exp; static constexpr const char* name = "exp"; static constexpr unsigned saves = kSaveOutput; };
struct Log { static constexpr int id = simd::log; static constexpr const char* name = "log"; static constexpr unsigned saves = kSaveInput(0); };
struct Sqrt { static constexpr int id = simd::sqrt; static constexpr const char* name = "sqrt"; static constexpr unsigned saves = kSaveOutput; };
struct Rsqrt { static constexpr int id = simd::rsqrt; static constexpr const char* name = "rsqrt"; static constexpr unsigned saves = kSaveOutput; };
struct Tanh { static constexpr int id = simd::tanh; static constexpr const char* name = "tanh"; static constexpr unsigned saves = kSaveOutput; };
struct Sigmoid { static constexpr int id = simd::sigmoid; static constexpr const char* name = "sigmoid"; static constexpr unsigned saves = kSaveOutput; };
struct Silu { static constexpr int id = simd::silu; static constexpr const char* name = "silu"; static constexpr unsigned saves = kSaveInput(0); };
struct Gelu { static constexpr int id = simd::gelu; static constexpr const char* name = "gelu"; static constexpr unsigned saves = kSaveInput(0); };  // erf form
struct GeluTanh { static constexpr int id = simd::gelu_tanh; static constexpr const char* name = "gelu_tanh"; static constexpr unsigned saves = kSaveInput(0); };
struct ReluSquared { static constexpr int id = simd::relu_squared; static constexpr const char* name = "relu_squared"; static constexpr unsigned saves = kSaveInput(0); };
struct Softplus { static constexpr int id = simd::softplus; static constexpr const char* name = "softplus"; static constexpr unsigned saves = kSaveInput(0); };
struct Pow { static constexpr int id = simd::pow; static constexpr const char* name = "pow"; static constexpr unsigned saves = kSaveInput(0); };  // x^param
struct Shift { static constexpr int id = simd::shift; static constexpr const char* name = "shift"; static constexpr unsigned saves = 0; };  // x + param

}  // namespace unary

// The number a function takes (pow's exponent, shift's constant).
struct UnaryOptions {
  Real param = 0;
};
template <class F>
struct UnaryOp {
  using Options = UnaryOptions;
  static constexpr const char* name = F::name;
  static constexpr int arity = 1;
  static constexpr unsigned saves = F::saves;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr bool in_place = true;  // y[i] = f(x[i]); the plan allows it where nothing reads x later
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::same_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  // Plain scalar loops, the reference the conformance harness checks the kernels against.
  template <class T> static void reference_forward(const OpArgs&);
};

namespace ops {
template <class F>
constexpr Value unary(Value x, const Loc& loc, Real param = 0) {
  return apply<UnaryOp<F>>({x}, {.param = param}, loc);
}
}  // namespace ops

constexpr Value neg(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Neg>(x, loc); }
constexpr Value exp(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Exp>(x, loc); }
constexpr Value log(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Log>(x, loc); }
constexpr Value sqrt(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Sqrt>(x, loc); }
constexpr Value rsqrt(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Rsqrt>(x, loc); }
constexpr Value tanh(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Tanh>(x, loc); }
constexpr Value sigmoid(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Sigmoid>(x, loc); }
constexpr Value silu(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Silu>(x, loc); }
// GELU, exact: x * Phi(x) = x/2 (1 + erf(x / sqrt 2)).
constexpr Value gelu(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Gelu>(x, loc); }
// GELU, tanh approximation (GPT-2): x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr Value gelu_tanh(Value x, Loc loc = Loc::current()) { return ops::unary<unary::GeluTanh>(x, loc); }
// log(1 + e^x), stable for any x (Mamba's step sizes).
constexpr Value softplus(Value x, Loc loc = Loc::current()) { return ops::unary<unary::Softplus>(x, loc); }
constexpr Value pow(Value x, Real p, Loc loc = Loc::current()) { return ops::unary<unary::Pow>(x, loc, p); }
// ReLU squared, max(x, 0)^2 (Primer, So et al. 2021; modded-nanogpt's MLP).
constexpr Value relu_squared(Value x, Loc loc = Loc::current()) { return ops::unary<unary::ReluSquared>(x, loc); }

// x + s for a number (or hyperparameter) s: a norm's (1 + w) gain, 1 - p.
constexpr Value shift(Value x, Real s, Loc loc = Loc::current()) { return ops::unary<unary::Shift>(x, loc, s); }

constexpr Value operator-(ValueAt x) { return neg(x.v, x.loc); }

// Arithmetic with a number: x + 1.0, 1.0 + x, x - 0.5, 1.0 - x, x / 2.0 (and x * s, s * x,
// ops/elementwise.hpp). Adding a constant 0 or dividing by a constant 1 adds no node; a
// hyperparameter is never folded (its value changes at run time).
namespace ops {
constexpr bool is_constant(const Real& s, double v) { return !s.is_hyper() && s.value == v; }
}  // namespace ops
constexpr Value operator+(ValueAt x, Real s) { return ops::is_constant(s, 0) ? x.v : shift(x.v, s, x.loc); }
constexpr Value operator+(Real s, ValueAt x) { return ops::is_constant(s, 0) ? x.v : shift(x.v, s, x.loc); }
constexpr Value operator-(ValueAt x, Real s) {
  if (ops::is_constant(s, 0)) return x.v;
  if (s.is_hyper()) return neg(shift(neg(x.v, x.loc), s, x.loc), x.loc);  // -(s - x): a hyperparameter is not negated in place
  return shift(x.v, Real(-s.value), x.loc);
}
constexpr Value operator-(Real s, ValueAt x) { return ops::is_constant(s, 0) ? neg(x.v, x.loc) : shift(neg(x.v, x.loc), s, x.loc); }
constexpr Value operator/(ValueAt x, double s) { return s == 1 ? x.v : scale(x.v, 1 / s, x.loc); }
// By a hyperparameter: refused (its reciprocal is no hyperparameter; scale by one instead).
constexpr Value operator/(ValueAt x, Real s) {
  if (!s.is_hyper()) return x / s.value;
  x.v.b->fail(Msg("x / s: s is a hyperparameter, whose reciprocal the graph cannot follow: scale by a hyperparameter of its own instead"), x.loc);
  return x.v;
}

}  // namespace ctgrad
