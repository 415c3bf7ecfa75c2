// A study's statistics: each configuration's mean, standard deviation and 95% interval over its
// seeds, and the paired difference against the baseline (Student's t).
#include <ctgrad/training/ablation.hpp>
#include <ctgrad/training/ablation_files.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace ctgrad::training::ablation {

namespace fs = std::filesystem;
using namespace files;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

double t975(int df) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                  2.120,  2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) throw std::invalid_argument("ctgrad: t975 needs df >= 1");
  if (df <= 30) return kTable[df - 1];
  // Beyond the table: the Cornish-Fisher expansion around the normal quantile (within 1e-4).
  const double z = 1.959964, n = double(df);
  return z + (z * z * z + z) / (4 * n) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * n * n);
}

std::vector<Summary> Study::summarize(const std::string& metric_name) const {
  const std::string m = metric_name.empty() ? metric() : metric_name;
  std::vector<Summary> out;
  std::map<std::string, std::size_t> index;
  for (const RunSpec& r : runs_) {
    auto [it, added] = index.emplace(r.config, out.size());
    if (added) {
      Summary s;
      s.config = r.config;
      for (std::size_t k = 0; k < o_.grid.size(); ++k) s.values.push_back(r.sets[k]);
      s.finals.assign(std::size_t(o_.seeds), kNaN);
      out.push_back(std::move(s));
    }
    Summary& s = out[it->second];
    std::error_code ec;
    if (!succeeded(r)) {
      s.failed += fs::is_regular_file(r.dir / "failed.json", ec);
      continue;
    }
    if (!result_damage(r, o_.metric).empty()) continue;  // named by damage(), not reported
    const json res = read_json(r.dir / "result.json");
    // A damaged result (damage() names it) counts as not run.
    if (!res.is_object() || !res.contains("final") || !res["final"].is_object() || !res["final"].contains(m) || !res["final"][m].is_number()) continue;
    s.finals[std::size_t(r.seed - 1)] = res["final"][m].get<double>();
    if (res.contains("train_seconds") && res["train_seconds"].is_number()) s.seconds += res["train_seconds"].get<double>();
    const json info = read_json(r.dir / "run.json");
    if (info.is_object() && info.contains("parameters"))
      if (const auto n = parameter_count(info["parameters"])) s.parameters = *n;
    if (info.is_object() && info.contains("non_embedding_parameters"))
      if (const auto n = parameter_count(info["non_embedding_parameters"])) s.non_embedding_parameters = *n;
  }
  auto stats = [](const std::vector<double>& x, double& mean, double& sd, double& ci) {
    const int n = int(x.size());
    mean = kNaN, sd = kNaN, ci = kNaN;  // undefined: written as empty (CSV) and null (JSON)
    if (n == 0) return;
    mean = 0;
    for (double v : x) mean += v / n;
    if (n < 2) return;
    sd = 0;
    for (double v : x) sd += (v - mean) * (v - mean) / (n - 1);
    sd = std::sqrt(sd);
    ci = t975(n - 1) * sd / std::sqrt(double(n));
  };
  for (Summary& s : out) {
    std::vector<double> x;
    for (double v : s.finals)
      if (!std::isnan(v)) x.push_back(v);
    s.n = int(x.size());
    if (s.n) s.seconds /= s.n;
    stats(x, s.mean, s.sd, s.ci);
    std::vector<double> d;  // paired with the baseline, seed by seed
    for (std::size_t k = 0; k < s.finals.size(); ++k)
      if (!std::isnan(s.finals[k]) && !std::isnan(out.front().finals[k])) d.push_back(s.finals[k] - out.front().finals[k]);
    s.pairs = int(d.size());
    double sd = 0;
    stats(d, s.diff, sd, s.diff_ci);
  }
  return out;
}

}  // namespace ctgrad::training::ablation
