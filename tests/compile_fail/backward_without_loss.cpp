// Must not compile: backward() on a graph that declares no loss.
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  g.output(relu(g.input("x", {Batch, 4})));
  return g;
};
static constexpr auto G = freeze<model>();
int main() {
  Program<G> p;
  p.backward();
}
