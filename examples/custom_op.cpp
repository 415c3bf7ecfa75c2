// Custom ops defined entirely in user code, checked with ctgrad::gradcheck and used in a model like
// any built-in op; nothing in the library is touched.
//   swish(x) = x * sigmoid(x)                        the smallest op: one input, same shape
//   swiglu(x) = swish(a, beta) * b, x = [a | b]      options (a Real: may be a hyperparameter) and
//                                                    a shape rule that changes a dim: [..., 2h] -> [..., h]
#include <cmath>
#include <cstdio>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/ops/kernels.hpp>  // ctgrad::parallel: loops whose chunks never depend on the thread count

using namespace ctgrad;

struct SwishOp {
  static constexpr const char* name = "swish";
  static constexpr int arity = 1;
  static constexpr unsigned saves = kSaveInput(0);  // the vjp reads x, not the output

  // Shape rule: runs at compile time. Output has the input's shape; index tensors are refused.
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (c.dtype[0] != DType::real) return ShapeResult::fail("expects a real input");
    ShapeResult r;
    r.shape = c.in[0];
    return r;
  }

  template <class T>
  static void forward(const OpArgs& a) {
    const T* x = a.in[0].as<T>();
    T* y = a.out.as<T>();
    parallel(a.out.numel, 4096, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) y[i] = x[i] / (T(1) + std::exp(-x[i]));
    });
  }

  // Vector-Jacobian product: add dL/dx to gin[0]. d/dx x*s(x) = s(x) * (1 + x * (1 - s(x))).
  template <class T>
  static void vjp(const OpArgs& a) {
    const T *x = a.in[0].as<T>(), *g = a.gout->as<T>();
    T* gx = a.gin[0].as<T>();
    parallel(a.out.numel, 4096, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const T s = T(1) / (T(1) + std::exp(-x[i]));
        gx[i] += g[i] * s * (T(1) + x[i] * (T(1) - s));
      }
    });
  }
};

// The user-facing function, like the built-in ones.
constexpr Value swish(Value x, Loc loc = Loc::current()) { return ops::apply<SwishOp>({x}, {}, loc); }

// An op with options: the struct is the node's attribute record, read back typed in the kernels.
struct SwiGluOptions {
  Real beta = 1;  // swish(a, beta) = a * sigmoid(beta a); a Real, so it may be a hyperparameter
};

struct SwiGluOp {
  using Options = SwiGluOptions;
  static constexpr const char* name = "swiglu";
  static constexpr int arity = 1;
  static constexpr unsigned saves = kSaveInput(0);

  // [..., 2h] -> [..., h]: the last dim must be static and even (Dim: coef * symbols).
  static constexpr ShapeResult shape(const ShapeCtx& c, const SwiGluOptions& o) {
    const Shape& x = c.in[0];
    if (c.dtype[0] != DType::real || x.rank < 1) return ShapeResult::fail("expects a real input of rank >= 1");
    if (!x.back(1).is_static() || x.back(1).coef % 2)
      return ShapeResult::fail(Msg("the last dim must be static and even, got ").add(x));
    if (!(o.beta > 0)) return ShapeResult::fail(Msg("beta must be positive, got ").add_number(o.beta));
    ShapeResult r;
    r.shape = x;
    r.shape[x.rank - 1] = Dim(x.back(1).coef / 2);
    return r;
  }

  template <class T>
  static void forward(const OpArgs& a) {
    const T beta = T(double(a.attrs<SwiGluOp>().beta));  // the hyperparameter's current value
    const std::int64_t h = a.out.size(-1);
    const T* x = a.in[0].as<T>();
    T* y = a.out.as<T>();
    parallel(a.out.rows(), 64, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t j = 0; j < h; ++j) {
          const T u = x[r * 2 * h + j], v = x[r * 2 * h + h + j];
          y[r * h + j] = u / (T(1) + std::exp(-beta * u)) * v;
        }
    });
  }

  template <class T>
  static void vjp(const OpArgs& a) {
    const T beta = T(double(a.attrs<SwiGluOp>().beta));
    const std::int64_t h = a.out.size(-1);
    const T *x = a.in[0].as<T>(), *g = a.gout->as<T>();
    T* gx = a.gin[0].as<T>();
    parallel(a.out.rows(), 64, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t j = 0; j < h; ++j) {
          const T u = x[r * 2 * h + j], v = x[r * 2 * h + h + j], s = T(1) / (T(1) + std::exp(-beta * u));
          gx[r * 2 * h + j] += g[r * h + j] * v * s * (T(1) + beta * u * (T(1) - s));
          gx[r * 2 * h + h + j] += g[r * h + j] * u * s;
        }
    });
  }
};

constexpr Value swiglu(Value x, SwiGluOptions o = {}, Loc loc = Loc::current()) { return ops::apply<SwiGluOp>({x}, o, loc); }

// 1. Gradient checks of the ops alone: loss = sum(op(x) * probe).
constexpr auto op_graph = [] {
  Builder g;
  Value x = g.input("x", {Batch, 8}, {.grad = true});
  g.loss(sum(swish(x) * g.input("probe", {Batch, 8})) + sum(swiglu(x, {.beta = 1.5}) * g.input("probe_h", {Batch, 4})));

  return g;
};
static constexpr auto OP = freeze<op_graph>();

// 2. The ops inside a model, trained a few steps; SwiGLU's beta is a hyperparameter.
constexpr auto model = [] {
  Builder g;
  Value x = g.input("x", {Batch, 16});
  Value y = g.input("y", {Batch}, {.dtype = DType::index});
  Value h = swish(layers::linear(g.scope("fc1"), x, 32));
  h = swiglu(layers::linear(g.scope("fc2"), h, 32), {.beta = g.hyper("swiglu_beta", 1.0)});  // [Batch, 16]
  g.loss(cross_entropy(layers::linear(g.scope("fc3"), h, 4), y));
  return g;
};
static constexpr auto MODEL = freeze<model>();

int main() {
  // Every element of every tensor (max_per_tensor = 0), at Batch = 3.
  GradcheckResult r = gradcheck<OP>({.seed = 2, .sym = {3, 1, 1, 1, 1, 1}}, {.max_per_tensor = 0});
  std::printf("swish and swiglu gradcheck: %s, %d elements, max error %.2e\n", r.ok ? "ok" : "FAILED", r.checked, r.max_abs_error);
  if (!r.ok) {
    std::printf("%s", r.report.c_str());
    return 1;
  }

  Program<MODEL> p({.seed = 1, .hypers = {{"swiglu_beta", 1.2}}});
  std::vector<float> x(64 * 16);
  std::vector<std::int32_t> y(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[i * 16] > 0 ? (x[i * 16 + 1] > 0 ? 0 : 1) : (x[i * 16 + 2] > 0 ? 2 : 3);
  p.set_input("x", std::span<const float>(x), {64, 16});
  p.set_input("y", std::span<const std::int32_t>(y), {64});
  float first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    p.zero_grad();
    p.forward();
    p.backward();
    auto v = p.parameter_values();
    auto g = p.parameter_grads();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] -= 0.5f * g[i];
    (step == 0 ? first : last) = p.loss();
  }
  std::printf("model with swish and swiglu: loss %.4f -> %.4f\n", first, last);
  return last < 0.5f * first ? 0 : 1;
}
