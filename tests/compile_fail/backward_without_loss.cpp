// Must not compile: backward() on a graph with neither a loss nor an output to seed it.
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  relu(g.input("x", {Batch, 4}));
  return g;
};
static constexpr auto G = freeze<model>();
int main() {
  Program<G> p;
  p.backward();
}
