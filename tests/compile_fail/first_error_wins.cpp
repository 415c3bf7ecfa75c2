// Must not compile: 3 heads do not divide width 64; a norm then reads the attention's (broken)
// output. The first error is the one reported, not an out-of-bounds read in the norm that follows.
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 64});
  Value y = layers::multi_head_attention(g.scope("attn"), {.q = x}, {.heads = 3}).out;
  g.output(layers::norm(g.scope("norm"), y, {.kind = layers::NormKind::rms}), "out");
  return g;
};
static constexpr auto G = freeze<model>();
int main() { Program<G> p; }
