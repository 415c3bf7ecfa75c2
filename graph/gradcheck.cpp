#include <ctgrad/graph/gradcheck.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

namespace ctgrad {

GradcheckResult gradcheck(Executor<double>& p, const GradcheckOptions& o) {
  GradcheckResult res;
  const std::int64_t step = p.steps();  // every forward below draws the same random numbers
  p.zero_grad();
  p.forward();
  p.backward();

  struct Target {
    std::string label;
    TensorView<double> value;
    std::vector<double> analytic;
  };
  std::vector<Target> targets;
  for (const auto& prm : p.parameters())
    targets.push_back({"param '" + std::string(prm.name) + "'", prm.value,
                       std::vector<double>(prm.grad.data, prm.grad.data + prm.grad.numel)});
  for (std::string_view in : p.grad_inputs()) {
    TensorView<double> g = p.input_grad(in);
    targets.push_back({"input '" + std::string(in) + "'", p.input_data(in),
                       std::vector<double>(g.data, g.data + g.numel)});
  }

  int failures = 0;
  double worst_excess = -1;
  // Every element, not only the sampled ones, must be finite: an assigned gradient an op left
  // unwritten is NaN (GradcheckOptions::poison_assigned_gradients).
  for (const Target& t : targets)
    for (std::size_t e = 0; e < t.analytic.size(); ++e)
      if (!std::isfinite(t.analytic[e])) {
        res.ok = false;
        res.worst = t.label + "[" + std::to_string(e) + "]: analytic " + std::to_string(t.analytic[e]) + " is not finite";
        res.report += res.worst + "\n";
        worst_excess = std::numeric_limits<double>::infinity();
        ++failures;
        break;
      }
  for (Target& t : targets) {
    const std::int64_t n = t.value.numel;
    const std::int64_t count = o.max_per_tensor > 0 ? std::min<std::int64_t>(n, o.max_per_tensor) : n;
    for (std::int64_t c = 0; c < count; ++c) {
      const std::int64_t e = count == n ? c : c * n / count;
      double& v = t.value.data[e];
      const double saved = v;
      v = saved + o.eps;
      p.set_steps(step);
      p.forward();
      const double lp = p.loss();
      v = saved - o.eps;
      p.set_steps(step);
      p.forward();
      const double lm = p.loss();
      v = saved;
      const double numeric = (lp - lm) / (2 * o.eps), analytic = t.analytic[static_cast<std::size_t>(e)];
      const double err = std::abs(analytic - numeric);
      const double allowed = o.atol + o.rtol * std::abs(numeric);
      ++res.checked;
      res.max_abs_error = std::max(res.max_abs_error, err);
      char line[256];
      std::snprintf(line, sizeof line, "%s[%lld]: analytic %.10g numeric %.10g", t.label.c_str(),
                    static_cast<long long>(e), analytic, numeric);
      const double excess = std::isnan(err) ? std::numeric_limits<double>::infinity() : err - allowed;
      if (excess > worst_excess) {
        worst_excess = excess;
        res.worst = line;
      }
      if (!(err <= allowed)) {  // a NaN gradient fails too
        res.ok = false;
        if (failures++ < 20) res.report += std::string(line) + "\n";
      }
    }
  }
  p.set_steps(step);
  p.forward();  // leave the program as it was: forward at the original values
  return res;
}

}  // namespace ctgrad
