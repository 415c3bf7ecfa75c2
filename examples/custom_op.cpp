// A custom op defined entirely in user code: swish(x) = x * sigmoid(x).
// Nothing in the library is touched; the op is checked with ctgrad::gradcheck and then used in a
// model like any built-in op.
#include <cmath>
#include <cstdio>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/ops/detail/kernel.hpp>  // kernel::parallel: deterministic parallel loops

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
    kernel::parallel(a.out.numel, 4096, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) y[i] = x[i] / (T(1) + std::exp(-x[i]));
    });
  }

  // Vector-Jacobian product: add dL/dx to gin[0]. d/dx x*s(x) = s(x) * (1 + x * (1 - s(x))).
  template <class T>
  static void vjp(const OpArgs& a) {
    const T *x = a.in[0].as<T>(), *g = a.gout->as<T>();
    T* gx = a.gin[0].as<T>();
    kernel::parallel(a.out.numel, 4096, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const T s = T(1) / (T(1) + std::exp(-x[i]));
        gx[i] += g[i] * s * (T(1) + x[i] * (T(1) - s));
      }
    });
  }
};

// The user-facing function, like the built-in ones.
constexpr Value swish(Value x, Loc loc = Loc::current()) { return ops::apply<SwishOp>({x}, {}, loc); }

// 1. Gradient check of the op alone: loss = sum(swish(x) * probe).
constexpr auto op_graph = [] {
  Builder g;
  Value x = g.input("x", {Batch, 7}, {.grad = true});
  Value probe = g.input("probe", {Batch, 7});
  g.loss(sum(swish(x) * probe));
  return g;
};
static constexpr auto OP = freeze<op_graph>();

// 2. The op inside a model, trained a few steps.
constexpr auto model = [] {
  Builder g;
  Value x = g.input("x", {Batch, 16});
  Value y = g.input("y", {Batch}, {.dtype = DType::index});
  Value h = swish(layers::linear(g.scope("fc1"), x, 32));
  g.loss(cross_entropy(layers::linear(g.scope("fc2"), h, 4), y));
  return g;
};
static constexpr auto MODEL = freeze<model>();

int main() {
  GradcheckResult r = gradcheck<OP>();
  std::printf("swish gradcheck: %s, %d elements, max error %.2e\n", r.ok ? "ok" : "FAILED", r.checked,
              r.max_abs_error);
  if (!r.ok) {
    std::printf("%s", r.report.c_str());
    return 1;
  }

  Program<MODEL> p(Options{.seed = 1});
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
  std::printf("model with swish: loss %.4f -> %.4f\n", first, last);
  return last < 0.5f * first ? 0 : 1;
}
