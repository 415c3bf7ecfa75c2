// Must not compile: attention scores over keys [Batch,Seq,SeqKV] added to a [Batch,Seq,Seq] bias.
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  Value q = g.input("q", {Batch, Seq, 64});
  Value k = g.input("k", {Batch, SeqKV, 64});
  Value bias = g.input("bias", {Batch, Seq, Seq});
  g.output(add(matmul(q, k, {.trans_b = true}), bias));
  return g;
};
static constexpr auto G = freeze<model>();
int main() { Program<G> p; }
