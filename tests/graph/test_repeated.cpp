// Runtime-depth stacks of one compiled block match the same depth unrolled in one graph.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "../models.hpp"

using namespace ctgrad;
using ctgrad::testing::mlp_block;

constexpr int D = 16, H = 32, C = 5, L = 4;

constexpr auto block = [] {
  Builder g;
  Value x = g.input("x", {Batch, D}, {.grad = true});
  g.output(mlp_block(g, x, D, H), "out");
  return g;
};
constexpr auto head = [] {
  Builder g;
  Value x = g.input("x", {Batch, D}, {.grad = true});
  Value y = g.input("y", {Batch}, {.dtype = DType::index});
  g.loss(cross_entropy(layers::linear(g.scope("head"), x, C), y));
  return g;
};
constexpr auto unrolled = [] {
  Builder g;
  Value x = g.input("x", {Batch, D});
  Value y = g.input("y", {Batch}, {.dtype = DType::index});
  for (int i = 0; i < L; ++i) x = mlp_block(g.scope("layers", i), x, D, H);
  g.loss(cross_entropy(layers::linear(g.scope("head"), x, C), y));
  return g;
};
static constexpr auto BLOCK = freeze<block>();
static constexpr auto HEAD = freeze<head>();
static constexpr auto UNROLLED = freeze<unrolled>();

TEST_CASE("a block repeated at run time equals the same depth unrolled in one graph", "[graph][repeated]") {
  const int batch = 8;
  std::vector<double> x(batch * D);
  std::vector<std::int32_t> y(batch);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.1 * double(int(i * 37 % 19) - 9);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % C);

  Program<UNROLLED, double> ref(Options{.seed = 3});
  ref.set_input("x", std::span<const double>(x), {batch, D});
  ref.set_input("y", std::span<const std::int32_t>(y), {batch});
  ref.forward();
  ref.backward();

  const int layers = L;  // a runtime value: could come from a config file
  Repeated<BLOCK, double> stack(layers, Options{.seed = 3});
  Program<HEAD, double> top(Options{.seed = 3});
  REQUIRE(stack.parameters().size() == 4 * L);
  CHECK(stack.parameters()[4].name == "layers.1.fc1.weight");

  stack.set_input("x", std::span<const double>(x), {batch, D});
  stack.forward();
  auto h = stack.output();
  top.set_input("x", std::span<const double>(h.span()), {batch, D});
  top.set_input("y", std::span<const std::int32_t>(y), {batch});
  top.forward();
  top.backward();
  stack.backward(top.input_grad("x").span());

  CHECK(top.loss() == Approx(ref.loss()).epsilon(1e-12));
  std::map<std::string, const Parameter<double>*> mine;
  for (const auto& p : stack.parameters()) mine[std::string(p.name)] = &p;
  for (const auto& p : top.parameters()) mine[std::string(p.name)] = &p;
  REQUIRE(mine.size() == ref.parameters().size());
  for (const auto& p : ref.parameters()) {
    INFO(p.name);
    const auto* q = mine.at(std::string(p.name));
    REQUIRE(q->value.numel == p.value.numel);
    for (std::int64_t e = 0; e < p.value.numel; ++e) {
      REQUIRE(q->value[e] == p.value[e]);  // same init: keyed on the full name
      REQUIRE(q->grad[e] == Approx(p.grad[e]).epsilon(1e-10).margin(1e-14));
    }
  }
}

TEST_CASE("backward of a loss-less graph needs its output gradient", "[graph][repeated][errors]") {
  Program<BLOCK> p;
  std::vector<float> x(2 * D, 0.5f);
  p.set_input("x", std::span<const float>(x), {2, D});
  p.forward();
  CHECK_THROWS_WITH(p.backward(), Catch::Matchers::Contains("output 'out' has no gradient"));
  std::vector<float> wrong(3);
  CHECK_THROWS_AS(p.set_output_grad("out", wrong), shape_error);
}
