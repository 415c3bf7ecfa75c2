// Must not compile: `a * b` of [Batch,8] and [Batch,9]; the error names this file and line, not
// the header where operator* is defined.
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  Value a = g.input("a", {Batch, 8});
  Value b = g.input("b", {Batch, 9});
  g.output(a * b);
  return g;
};
static constexpr auto G = freeze<model>();
int main() { Program<G> p; }
