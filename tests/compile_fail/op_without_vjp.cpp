// Must not compile: a differentiable op with a forward but no vjp.
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

struct CubeOp {
  static constexpr const char* name = "cube";
  static constexpr int arity = 1;
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::same_shape(c); }
  template <class T>
  static void forward(const OpArgs& a) {
    for (std::int64_t i = 0; i < a.out.numel; ++i) a.out.as<T>()[i] = a.in[0].as<T>()[i] * a.in[0].as<T>()[i] * a.in[0].as<T>()[i];
  }
};

constexpr auto model = [] {
  Builder g;
  Value x = g.input("x", {Batch, 4});
  g.output(g.apply<CubeOp>({x}));
  return g;
};
static constexpr auto G = freeze<model>();
int main() { Program<G> p; }
