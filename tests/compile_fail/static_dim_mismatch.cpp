// Must not compile: a layer built for 512 features is fed [Batch, Seq, 256].
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/linear.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 256});
  Value w = g.scope("ff").param("weight", {2048, 512}, init::zeros());
  g.output(matmul(x, w, {.trans_b = true}));
  return g;
};
static constexpr auto G = freeze<model>();
int main() { Program<G> p; }
