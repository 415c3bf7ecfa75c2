// Must not compile: token ids (int32) fed to a linear layer; the error names the dtype and the
// line of the layer call in this file, not a line of the layer's header.
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  Value ids = g.input("ids", {Batch, Seq}, {.dtype = DType::index});
  g.output(layers::linear(g.scope("proj"), ids, 16));
  return g;
};
static constexpr auto G = freeze<model>();
int main() { Program<G> p; }
