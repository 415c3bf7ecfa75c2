// gradcheck: compares backward() with central finite differences, in double precision, for every
// parameter and every input declared In{.grad = true}.
//
//   auto r = ctgrad::gradcheck<G>([](auto& p) { p.set_input("x", data, {2, 3}); });
//   REQUIRE(r.ok);  // r.report names the worst tensor and element
#pragma once
#include <concepts>
#include <string>
#include <type_traits>
#include <vector>

#include <ctgrad/base/random.hpp>

#include <ctgrad/graph/program.hpp>

namespace ctgrad {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;   // pass if |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-5;
  int max_per_tensor = 64;  // elements checked per tensor (spread evenly), 0 = all
  std::uint64_t seed = 7;   // parameter init
  // Gradients that an op assigns start as NaN (Options::poison_assigned_gradients): an op that
  // adds to its first gradient, or leaves part of it unwritten, fails the check.
  bool poison_assigned_gradients = true;
};

struct GradcheckResult {
  bool ok = true;
  int checked = 0;
  double max_abs_error = 0;
  std::string worst;   // "param 'fc1.weight'[17]: analytic 0.1234 numeric 0.1236"
  std::string report;  // every failing element, one per line (capped)
};

// The values of one index input, [lo, hi): e.g. targets that include an ignore_index of -1.
struct IndexRange {
  std::string_view input;
  std::int32_t lo = 0, hi = 1;
};

// Sets every input of a program to seeded random data: real inputs ~ N(0, 1), index inputs
// uniform in [0, index_range), or in their own range. Runtime symbols take the values in `sym`
// (Batch, Seq, SeqKV, ...).
struct RandomInputs {
  std::uint64_t seed = 1;
  std::array<std::int64_t, kMaxSymbols> sym{3, 4, 5, 2, 2, 2};
  std::int32_t index_range = 3;
  bool positive = false;  // real inputs 0.5 + |N(0, 1)|: for log, sqrt, pow, ...
  std::vector<IndexRange> index_ranges = {};  // per input, overriding index_range
};
template <class P>
void fill_random_inputs(P& p, const RandomInputs& o = {}) {
  using T = std::remove_reference_t<decltype(*p.parameter_values().data())>;
  const auto& g = P::graph;
  for (int i = 0; i < g.size; ++i) {
    const Node& n = g[i];
    if (n.kind != NodeKind::input) continue;
    std::array<std::int64_t, kMaxRank> dims{};
    std::int64_t numel = 1;
    for (int d = 0; d < n.shape.rank; ++d) numel *= dims[std::size_t(d)] = n.shape[d].eval(o.sym);
    const std::uint64_t key = random::key(o.seed, g.name(i));
    std::span<const std::int64_t> shape(dims.data(), std::size_t(n.shape.rank));
    if (n.dtype == DType::index) {
      std::int32_t lo = 0, hi = o.index_range;
      for (const IndexRange& r : o.index_ranges)
        if (r.input == g.name(i)) lo = r.lo, hi = r.hi;
      std::vector<std::int32_t> v(static_cast<std::size_t>(numel));
      for (std::int64_t k = 0; k < numel; ++k)
        v[std::size_t(k)] = lo + std::int32_t(random::bits(key, std::uint64_t(k)) % std::uint64_t(std::max(1, hi - lo)));

      p.set_input(g.name(i), std::span<const std::int32_t>(v), shape);
    } else {
      std::vector<T> v(static_cast<std::size_t>(numel));
      for (std::int64_t k = 0; k < numel; ++k) {
        const double r = random::normal(key, std::uint64_t(k));
        v[std::size_t(k)] = T(o.positive ? 0.5 + (r < 0 ? -r : r) : r);
      }
      p.set_input(g.name(i), std::span<const T>(v), shape);
    }
  }
}

// Checks a program whose inputs are already set. Compiled once in the library.
GradcheckResult gradcheck(Executor<double>& program, const GradcheckOptions& opts = {});

template <const auto& G, class Setup>
  requires std::invocable<Setup&, Program<G, double>&>
GradcheckResult gradcheck(Setup&& set_inputs, const GradcheckOptions& opts = {}) {
  Program<G, double> p(Options{.seed = opts.seed, .poison_assigned_gradients = opts.poison_assigned_gradients});
  set_inputs(p);
  return gradcheck(static_cast<Executor<double>&>(p), opts);
}

// With random inputs (see RandomInputs).
template <const auto& G>
GradcheckResult gradcheck(const RandomInputs& in = {}, const GradcheckOptions& opts = {}) {
  return gradcheck<G>([&](auto& p) { fill_random_inputs(p, in); }, opts);
}

}  // namespace ctgrad
