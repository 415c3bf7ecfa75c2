#include <ctgrad/ctgrad.hpp>

#include <cstdio>
#include <vector>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  Value x = g.input("x", {Batch, 3});
  Value w = g.param("w", {3, 2}, init::constant(0.5));
  g.loss(sum(relu(matmul(x, w))));
  return g;
};
static constexpr auto G = freeze<model>();

int main() {
  Program<G> p;
  std::vector<float> x = {1, 2, 3, -1, -2, -3};
  p.set_input("x", std::span<const float>(x), {2, 3});
  p.forward();
  p.backward();
  // relu(x w): row 0 gives 3 and 3, row 1 is negative -> 0. Loss 6; dL/dw[i][j] = x[0][i].
  const auto& w = p.parameter("w");
  bool ok = p.loss() == 6.0f && w.grad[0] == 1.0f && w.grad[5] == 3.0f;
  std::printf("consumer: loss %g, %s\n", double(p.loss()), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
