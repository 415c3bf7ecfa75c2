// Must not compile: 24 encoder-sized blocks, then a head built for the wrong width. The error must
// stay as short as for a one-block model.
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/linear.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 512});
  for (int i = 0; i < 24; ++i) {
    Scope b = g.scope("enc", i);
    x = layers::linear(b.scope("fc2"), relu(layers::linear(b.scope("fc1"), x, 2048)), 512) + x;
  }
  Value w = g.scope("head").param("weight", {1000, 256}, init::zeros());
  g.output(matmul(x, w, {.trans_b = true}));
  return g;
};
static constexpr auto G = freeze<model>();
int main() { Program<G> p; }
