// Backward derived from the ops' VJPs, checked against finite differences in double precision.
#include <catch2/catch.hpp>

#include "../models.hpp"

using namespace ctgrad;

#define REQUIRE_GRADCHECK(result)                         \
  do {                                                    \
    auto r_ = (result);                                   \
    INFO("worst: " << r_.worst << "\n" << r_.report);     \
    CHECK(r_.checked > 0);                                \
    REQUIRE(r_.ok);                                       \
  } while (0)

static constexpr auto MLP = freeze<ctgrad::testing::mlp_classifier<6, 10, 3, 2>>();
static constexpr auto ATTN = freeze<ctgrad::testing::attention_model<6>>();

TEST_CASE("gradcheck: MLP blocks with residuals", "[autodiff]") {
  REQUIRE_GRADCHECK(gradcheck<MLP>(RandomInputs{.seed = 11}));
}

TEST_CASE("gradcheck: single-head attention with a key-padding mask", "[autodiff]") {
  auto set = [](auto& p) {
    fill_random_inputs(p, {.seed = 12, .sym = {2, 5, 5, 1, 1, 1}});
    // Sequence 0 has 5 valid keys, sequence 1 has 3: its last two keys are masked.
    std::vector<double> mask = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    p.set_input("mask", std::span<const double>(mask), {2, 1, 5});
  };
  REQUIRE_GRADCHECK(gradcheck<ATTN>(set, {.max_per_tensor = 40}));
  // Masked keys get no attention, so their inputs' gradient comes only through their own queries.
}

// A value used several times accumulates its gradient: d/dw sum(w*w + w) = 2w + 1.
constexpr auto multi_use = [] {
  Builder g;
  Value w = g.param("w", {5}, init::normal(1.0));
  g.loss(sum(w * w + w));
  return g;
};
static constexpr auto MULTI = freeze<multi_use>();

TEST_CASE("a value used several times accumulates its gradient", "[autodiff]") {
  Program<MULTI, double> p(Options{.seed = 3});
  p.forward();
  p.backward();
  const auto& w = p.parameter("w");
  for (int i = 0; i < 5; ++i) CHECK(w.grad[i] == Approx(2 * w.value[i] + 1).epsilon(1e-12));
  REQUIRE_GRADCHECK(gradcheck<MULTI>());
}

// detach: the gradient stops; the value still flows forward.
constexpr auto detached = [] {
  Builder g;
  Value a = g.param("a", {4}, init::normal(1.0));
  Value b = g.param("b", {4}, init::normal(1.0));
  g.loss(sum(a * detach(b)));
  return g;
};
static constexpr auto DETACHED = freeze<detached>();

TEST_CASE("detach stops the gradient", "[autodiff]") {
  Program<DETACHED, double> p(Options{.seed = 4});
  const auto &a = p.parameter("a"), &b = p.parameter("b");
  for (int i = 0; i < 4; ++i) b.grad[i] = 42.0;  // a sentinel: backward must not touch it
  p.forward();
  p.backward();
  for (int i = 0; i < 4; ++i) {
    CHECK(a.grad[i] == b.value[i]);  // d/da sum(a*b) = b
    CHECK(b.grad[i] == 42.0);        // nothing flows through detach
  }
  STATIC_REQUIRE(!Program<DETACHED>::train_plan.needs_grad[1]);  // b needs no gradient at all
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[autodiff]") {
  Program<MULTI, double> p(Options{.seed = 3});
  p.forward();
  p.backward();
  double once = p.parameter("w").grad[0];
  p.forward();
  p.backward();
  CHECK(p.parameter("w").grad[0] == Approx(2 * once));
  p.zero_grad();
  CHECK(p.parameter("w").grad[0] == 0.0);
}
