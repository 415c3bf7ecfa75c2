// xtensor interop: inputs from xt::xarray, outputs and parameters as xtensor views.
#include <catch2/catch.hpp>

#include <ctgrad/graph/xtensor.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "../models.hpp"

using namespace ctgrad;

constexpr auto affine = [] {
  Builder g;
  Value x = g.input("x", {Batch, 3});
  Value w = g.param("w", {3, 2}, init::constant(1.0));
  g.output(matmul(x, w), "y");
  g.loss(sum(matmul(x, w)));
  return g;
};
static constexpr auto G = freeze<affine>();

TEST_CASE("xtensor in, xtensor views out", "[graph][xtensor]") {
  Program<G> p;
  xt::xarray<float> x = {{1, 2, 3}, {4, 5, 6}};
  set_input(p, "x", xt::transpose(xt::transpose(x)));  // any expression, evaluated row-major
  p.forward();
  p.backward();
  auto y = as_xtensor(p.output("y"));
  REQUIRE(y.shape()[0] == 2);
  CHECK(y(0, 0) == 6.0f);
  CHECK(y(1, 1) == 15.0f);
  // d/dw sum(x w) = x^T 1: column sums of x, the same for both output columns.
  auto gw = as_xtensor(p.parameter("w").grad);
  CHECK(gw(0, 0) == 5.0f);
  CHECK(gw(2, 1) == 9.0f);
  // Views write through: scaling the weights changes the next forward.
  auto w = as_xtensor(p.parameter("w").value);
  w *= 2.0f;
  p.forward();
  CHECK(as_xtensor(p.output("y"))(0, 0) == 12.0f);
  xt::xarray<float> wrong = {1, 2, 3};
  CHECK_THROWS_AS(set_input(p, "x", wrong), shape_error);
}
