// Must not compile: a GRU cell of 64 fed a 32-wide state inside a scan's body; the error names the
// body's line.
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 16});
  ScanResult r = scan(g.scope("rnn"), {.init = {scan_zeros({Batch, 32})}, .xs = {x}}, [&](const Scope& s, const ScanStep& t) -> ScanStepResult {
    Value h = layers::gru_cell(s.scope("cell"), t.x[0], t.state[0], 64);
    return {.state = {h}};
  });
  g.loss(sum(r.last[0]));
  return g;
};
static constexpr auto G = freeze<model>();
int main() { Program<G> p; }
