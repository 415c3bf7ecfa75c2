// gradcheck: compares backward() with central finite differences, in double precision, for every
// parameter and every input declared In{.grad = true}.
//
//   auto r = ctgrad::gradcheck<G>([](auto& p) { p.set_input("x", data, {2, 3}); });
//   REQUIRE(r.ok);  // r.report names the worst tensor and element
#pragma once
#include <string>

#include <ctgrad/graph/program.hpp>

namespace ctgrad {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;   // pass if |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-5;
  int max_per_tensor = 64;  // elements checked per tensor (spread evenly), 0 = all
  std::uint64_t seed = 7;   // parameter init
};

struct GradcheckResult {
  bool ok = true;
  int checked = 0;
  double max_abs_error = 0;
  std::string worst;   // "param 'fc1.weight'[17]: analytic 0.1234 numeric 0.1236"
  std::string report;  // every failing element, one per line (capped)
};

// Checks a program whose inputs are already set. Compiled once in the library.
GradcheckResult gradcheck(Executor<double>& program, const GradcheckOptions& opts = {});

template <const auto& G, class Setup>
GradcheckResult gradcheck(Setup&& set_inputs, const GradcheckOptions& opts = {}) {
  Program<G, double> p(Options().seed(opts.seed));
  set_inputs(p);
  return gradcheck(static_cast<Executor<double>&>(p), opts);
}

}  // namespace ctgrad
