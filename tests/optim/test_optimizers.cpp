// Optimizers on parameters large enough to be split over threads: the same bits on 1 and 2
// threads (fixed-order sums); Adafactor's arithmetic is checked against NumPy by optim_trace.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/graph/random.hpp>

#include "../host.hpp"

using namespace ctgrad;

namespace {
// One [8100, 256] matrix (the T5-small embedding's shape: chunks that do not divide it evenly) and
// a vector, and a loss that touches both.
constexpr auto kModel = [] {
  Builder g;
  Value w = g.scope("w").param("weight", {8100, 256}, init::normal(0.05));
  Value b = g.scope("b").param("bias", {300}, init::normal(0.05));
  g.loss(add(sum(mul(w, w)), sum(mul(b, b))));
  return g;
};
constexpr auto kGraph = freeze<kModel>();

std::vector<float> train(int threads, int steps) {
  Program<kGraph> p(Options{.threads = threads, .seed = 3});
  optim::Adafactor<float> opt(p.parameters(), {.lr = 0.01, .relative_step = false});
  for (int s = 0; s < steps; ++s) {
    p.zero_grad();
    p.forward();
    p.backward();
    for (auto& q : p.parameters())  // gradients of every scale, not just 2w
      for (std::int64_t i = 0; i < q.grad.numel; ++i) q.grad.data[i] *= float(1 + 3 * random::uniform(random::key(std::uint64_t(s), 7, 1), std::uint64_t(i)));
    p.execute([&] { opt.step(); });
  }
  std::vector<float> out;
  for (const auto& q : p.parameters()) out.insert(out.end(), q.value.span().begin(), q.value.span().end());
  return out;
}
}  // namespace

TEST_CASE("Adafactor: the same bits on 1 and 2 threads, on a matrix its chunks do not divide", "[optim]") {
  if (!ctgrad::testing::two_cpus()) return;
  CHECK(train(1, 3) == train(2, 3));
}
