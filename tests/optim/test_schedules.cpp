// Learning-rate schedules against their formulas.
#include <catch2/catch.hpp>

#include <cmath>

#include <ctgrad/optim/schedule.hpp>

using namespace ctgrad::optim;

TEST_CASE("Noam: d^-0.5 min(t^-0.5, t warmup^-1.5), peaking at the end of warm-up", "[optim][schedule]") {
  auto s = noam(512, 4000);
  CHECK(s(1) == Approx(std::pow(512, -0.5) * std::pow(4000, -1.5)));
  CHECK(s(4000) == Approx(std::pow(512, -0.5) * std::pow(4000, -0.5)));
  CHECK(s(16000) == Approx(std::pow(512, -0.5) / std::sqrt(16000.0)));
  CHECK(s(3999) < s(4000));
  CHECK(s(4001) < s(4000));
  CHECK(noam(512, 4000, 2.0)(100) == Approx(2 * s(100)));
}

TEST_CASE("linear warm-up then cosine or linear decay", "[optim][schedule]") {
  auto c = warmup_cosine(1e-3, 1e-4, 100, 2000);
  CHECK(c(50) == Approx(5e-4));
  CHECK(c(100) == Approx(1e-3));
  CHECK(c(1050) == Approx(1e-4 + 0.9e-3 * 0.5));  // half way: cos = 0
  CHECK(c(2000) == Approx(1e-4));
  CHECK(c(5000) == Approx(1e-4));
  auto l = warmup_linear(1e-3, 0, 10, 110);
  CHECK(l(60) == Approx(0.5e-3));
}

TEST_CASE("warmup-stable-decay", "[optim][schedule]") {
  auto s = warmup_stable_decay(1.0, 0.1, 10, 100, 20);
  CHECK(s(5) == Approx(0.5));
  CHECK(s(10) == Approx(1.0));
  CHECK(s(110) == Approx(1.0));
  CHECK(s(120) == Approx(0.55));
  CHECK(s(130) == Approx(0.1));
  CHECK(s(500) == Approx(0.1));
  CHECK(constant(3e-4)(12345) == 3e-4);
}

TEST_CASE("T5's inverse square root: 1/sqrt(max(t, k)), constant for k updates", "[optim][schedule]") {
  auto s = inverse_sqrt(10000);
  CHECK(s(1) == Approx(0.01));
  CHECK(s(10000) == Approx(0.01));
  CHECK(s(40000) == Approx(0.005));
  CHECK(inverse_sqrt(100, 3.0)(400) == Approx(0.15));
}
