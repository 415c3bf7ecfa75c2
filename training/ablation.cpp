#include <ctgrad/training/ablation.hpp>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/training/folder_lock.hpp>
#include <ctgrad/training/log.hpp>
#include <ctgrad/training/trainer.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

namespace ctgrad::training::ablation {

namespace fs = std::filesystem;
using json = nlohmann::json;

double t975(int df) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                  2.120,  2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) throw std::invalid_argument("ctgrad: t975 needs df >= 1");
  if (df <= 30) return kTable[df - 1];
  // Beyond the table: the Cornish-Fisher expansion around the normal quantile (within 1e-4).
  const double z = 1.959964, n = double(df);
  return z + (z * z * z + z) / (4 * n) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * n * n);
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A configuration's folder name: its settings with other characters as '_', cut at 120 bytes with a
// hash of the whole (so that long grid values keep names apart and within NAME_MAX).
std::string folder_name(const std::string& config) {
  std::string s;
  for (char c : config) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  if (s.size() <= 120) return s;
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : config) h = (h ^ c) * 1099511628211ull;
  char tail[24];
  std::snprintf(tail, sizeof tail, "_%016llx", static_cast<unsigned long long>(h));
  return s.substr(0, 100) + tail;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A run's small JSON file (result.json, run.json): at most 1 MiB; `why` says what else it is (the
// parser's own words: NaN, a number past a double's range, a cut file).
json read_json(const fs::path& p, std::string* why = nullptr) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  std::string problem;
  if (ec) problem = "cannot be read (" + ec.message() + ")";
  else if (size > (std::uintmax_t(1) << 20)) problem = "is larger than 1 MiB: not a file a run wrote";
  else
    try {
      return json::parse(read_text(p));
    } catch (const json::exception& e) {
      std::string m = e.what();
      if (m.rfind("[json.exception.", 0) == 0 && m.find("] ") != std::string::npos) m = m.substr(m.find("] ") + 2);
      problem = "is not JSON (" + printable(m.substr(0, 200)) + ")";
    }
  if (why) *why = problem;
  return json(json::value_t::discarded);
}

// The validation records of a run: step -> metric -> value, and the training time at the last one.
struct Curve {
  std::vector<std::int64_t> steps;
  std::vector<std::map<std::string, double>> values;
  double seconds = 0;
  std::string metric = "loss";  // the first metric the run reports ("val_loss" is its alias)
};
Curve read_curve(const fs::path& jsonl) {
  Curve c;
  std::ifstream f(jsonl);
  std::string line;
  while (std::getline(f, line)) {
    const json r = json::parse(line, nullptr, false);
    if (!r.is_object() || !r.contains("step") || !r["step"].is_number_integer()) continue;
    std::map<std::string, double> v;
    for (const auto& [k, x] : r.items())
      if (k.rfind("val_", 0) == 0 && x.is_number()) v[k.substr(4)] = x.get<double>();
    if (v.empty()) continue;
    c.steps.push_back(r["step"].get<std::int64_t>());
    c.values.push_back(std::move(v));
    if (r.contains("train_seconds") && r["train_seconds"].is_number()) c.seconds = r["train_seconds"].get<double>();
    if (r.contains("metric") && r["metric"].is_string()) c.metric = r["metric"].get<std::string>();
  }
  if (c.metric != "loss")  // "loss" is then the alias of another metric
    for (auto& v : c.values) v.erase("loss");
  return c;
}

json study_json(const StudyOptions& o) {
  json grid = json::array();
  for (const Axis& a : o.grid) grid.push_back({{"key", a.key}, {"values", a.values}});
  json fixed = json::array();
  for (const auto& [k, v] : o.fixed) fixed.push_back({k, v});
  return {{"format", "ctgrad-study-1"}, {"model", o.model}, {"grid", grid}, {"fixed", fixed}};
}

}  // namespace

void record_parameters(const fs::path& run_dir, std::int64_t parameters) {
  checkpoint::write_atomically(run_dir / "run.json", json{{"parameters", parameters}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

const std::string& RunSpec::value(const std::string& key) const {
  for (const auto& [k, v] : sets)
    if (k == key) return v;
  throw std::invalid_argument("ctgrad: the study run " + config + " sets no '" + key + "'");
}

Study::Study(StudyOptions o) : o_(std::move(o)) {
  if (o_.grid.empty()) throw std::invalid_argument("ctgrad: an ablation study needs a grid (--grid key=a,b)");
  if (o_.seeds < 1) throw std::invalid_argument("ctgrad: an ablation study needs at least 1 seed");
  if (o_.jobs < 1) throw std::invalid_argument("ctgrad: --jobs must be at least 1");
  std::set<std::string> keys;
  std::uint64_t configs = 1;  // checked: a grid of 8 keys x 256 values is 2^64 configurations
  for (const Axis& a : o_.grid) {
    if (a.key.empty()) throw std::invalid_argument("ctgrad: a grid key is empty");
    if (!keys.insert(a.key).second) throw std::invalid_argument("ctgrad: the grid names '" + a.key + "' twice");
    if (a.values.empty()) throw std::invalid_argument("ctgrad: the grid key '" + a.key + "' has no values");
    std::set<std::string> vals;
    for (const auto& v : a.values)
      if (!vals.insert(v).second) throw std::invalid_argument("ctgrad: the grid key '" + a.key + "' lists '" + v + "' twice");
    configs = std::min<std::uint64_t>(configs * a.values.size(), kMaxRuns + 1);  // at most 10001 x a value count: no wrap
  }
  for (const auto& [k, v] : o_.fixed)
    if (keys.count(k)) throw std::invalid_argument("ctgrad: '" + k + "' is both a grid key and a fixed setting");
  auto size_text = [&] {
    std::string t = "this study is ";
    if (configs > kMaxRuns) {
      t += "more than " + std::to_string(kMaxRuns) + " configurations (";
      for (std::size_t k = 0; k < o_.grid.size(); ++k) t += (k ? " x " : "") + std::to_string(o_.grid[k].values.size());
      return t + ")";
    }
    return t + std::to_string(configs) + " configurations x " + std::to_string(o_.seeds) + " seeds = " +
           std::to_string(configs * std::uint64_t(o_.seeds)) + " runs";
  };
  if (configs > kMaxRuns || configs * std::uint64_t(o_.seeds) > kMaxRuns)
    throw std::invalid_argument("ctgrad: " + size_text() + ", more than the " + std::to_string(kMaxRuns) + " runs a study can hold: split it");
  const std::uint64_t total = configs * std::uint64_t(o_.seeds);
  if (total > std::uint64_t(std::max(o_.max_runs, 0)) && !o_.yes)
    throw std::invalid_argument("ctgrad: " + size_text() + ", more than " + std::to_string(o_.max_runs) + ": add --yes to run them all");
  // Every combination, the last key fastest; the baseline (all first values) first.
  std::vector<std::size_t> at(o_.grid.size(), 0);
  runs_.reserve(std::size_t(total));
  for (std::size_t c = 0; c < configs; ++c) {
    std::string config;
    std::vector<std::pair<std::string, std::string>> sets;
    for (std::size_t k = 0; k < o_.grid.size(); ++k) {
      const std::string& v = o_.grid[k].values[at[k]];
      config += (config.empty() ? "" : ",") + o_.grid[k].key + "=" + v;
      sets.emplace_back(o_.grid[k].key, v);
    }
    sets.insert(sets.end(), o_.fixed.begin(), o_.fixed.end());
    char index[32];
    std::snprintf(index, sizeof index, "%03zu_", c);
    for (int s = 1; s <= o_.seeds; ++s)
      runs_.push_back({config, sets, s, o_.dir / "runs" / (index + folder_name(config)) / ("seed" + std::to_string(s))});
    for (std::size_t k = o_.grid.size(); k-- > 0;) {
      if (++at[k] < o_.grid[k].values.size()) break;
      at[k] = 0;
    }
  }
}

void Study::lock() const {
  if (!lock_) lock_ = std::make_shared<FolderLock>(o_.dir, "study.lock", "the study folder", "another ctgrad ablate");
}

void Study::prepare() const {
  std::error_code ec;
  fs::create_directories(o_.dir, ec);
  if (!fs::is_directory(o_.dir, ec))
    throw std::invalid_argument("ctgrad: the study folder " + printable(o_.dir.string()) + " cannot be made" + (ec ? ": " + ec.message() : ""));
  lock();
  const fs::path file = o_.dir / "study.json";
  const json mine = study_json(o_);
  if (fs::exists(fs::symlink_status(file, ec))) {
    if (!fs::is_regular_file(file, ec))  // a FIFO would block the read
      throw std::invalid_argument("ctgrad: " + printable(file.string()) + " is not a regular file: this folder holds something else; use another --run folder");
    const json theirs = read_json(file);
    if (theirs.is_discarded() || !theirs.is_object() || !theirs.contains("format"))
      throw std::invalid_argument("ctgrad: " + printable(file.string()) + " is not a study file ctgrad wrote: this folder holds something else; " +
                                  "use another --run folder");
    if (theirs != mine)
      throw std::invalid_argument("ctgrad: " + o_.dir.string() + " holds another study (" + file.string() + " differs: model, grid or fixed " +
                                  "settings): use another --run folder");
    return;
  }
  for (const auto& e : fs::directory_iterator(o_.dir, ec))
    if (e.path().filename() != "runs" && e.path().filename() != "study.lock")
      throw std::invalid_argument("ctgrad: " + o_.dir.string() + " holds files of something else (" + e.path().filename().string() +
                                  "): a study needs a folder of its own");
  checkpoint::write_atomically(file, mine.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

bool Study::finished(const RunSpec& r) const {
  std::error_code ec;
  return fs::is_regular_file(r.dir / "result.json", ec) || (!o_.retry_failed && fs::is_regular_file(r.dir / "failed.json", ec));
}

bool Study::succeeded(const RunSpec& r) const {
  std::error_code ec;
  return fs::is_regular_file(r.dir / "result.json", ec);
}

std::string Study::metric() const {
  if (!o_.metric.empty()) return o_.metric;
  for (const RunSpec& r : runs_) {  // the first metric the runs report (a model's loss, a classifier's error)
    if (!succeeded(r)) continue;
    const json res = read_json(r.dir / "result.json");
    if (res.is_object() && res.contains("metric") && res["metric"].is_string() && res.contains("final") && res["final"].is_object() &&
        res["final"].contains(res["metric"].get<std::string>()))  // (a damaged result names no metric: damage() says so)
      return res["metric"].get<std::string>();
  }
  return "loss";
}

std::vector<std::string> Study::metrics() const {
  std::vector<std::string> out{metric()};
  for (const RunSpec& r : runs_) {
    if (!succeeded(r)) continue;
    const json res = read_json(r.dir / "result.json");
    if (!res.is_object() || !res.contains("final") || !res["final"].is_object()) continue;
    for (const auto& [k, v] : res["final"].items())
      if (v.is_number() && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  return out;
}

std::vector<std::string> Study::damage() const {
  std::vector<std::string> out;
  for (const RunSpec& r : runs_) {
    if (!succeeded(r)) continue;
    const fs::path file = r.dir / "result.json";
    std::string why;
    const json res = read_json(file, &why);
    const std::string where = printable(file.string());
    if (res.is_discarded()) {
      out.push_back(where + " " + why);
      continue;
    }
    if (!res.is_object()) {
      out.push_back(where + " holds a JSON " + res.type_name() + ", not an object");
      continue;
    }
    if (!res.contains("final") || !res["final"].is_object()) {
      out.push_back(where + ": 'final' is missing or not an object");
      continue;
    }
    for (const auto& [k, v] : res["final"].items())
      if (!v.is_number()) out.push_back(where + ": 'final." + printable(k) + "' is " + (v.is_null() ? "null" : std::string("a ") + v.type_name()) + ", not a number");
    // What the run logged: its metric is among its finals; the study's compared metric is too.
    const std::string logged = res.contains("metric") && res["metric"].is_string() ? res["metric"].get<std::string>() : "";
    if (!res.contains("metric") || !res["metric"].is_string()) out.push_back(where + ": 'metric' is missing or not a string");
    else if (!res["final"].contains(logged)) out.push_back(where + ": 'metric' names '" + printable(logged) + "', which 'final' lacks");
    else if (!o_.metric.empty() && !res["final"].contains(o_.metric)) out.push_back(where + ": 'final' lacks the compared metric '" + printable(o_.metric) + "'");
    if (res.contains("train_seconds") && !res["train_seconds"].is_number()) out.push_back(where + ": 'train_seconds' is not a number");
  }
  return out;
}

bool lower_is_better(const std::string& m) {
  return m.find("loss") != std::string::npos || m.find("error") != std::string::npos || m.find("nll") != std::string::npos ||
         m == "perplexity";
}
bool Study::lower_is_better() const { return ablation::lower_is_better(metric()); }

int Study::run(const RunFn& f) const {
  prepare();
  std::vector<const RunSpec*> todo;
  for (const RunSpec& r : runs_)
    if (!finished(r)) todo.push_back(&r);
  const int cores = o_.threads > 0 ? o_.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const int jobs = std::max(1, std::min<int>(o_.jobs, int(todo.size())));
  const int threads = std::max(1, cores / jobs);
  const std::size_t done_before = runs_.size() - todo.size();
  std::mutex m;
  std::condition_variable cv;
  std::size_t next = 0, running = 0, done = 0;
  int failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto progress = [&] {  // under m
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::size_t left = todo.size() - done - running;
    std::string eta = "?";
    if (done > 0) eta = format_duration(secs / double(done) * double(left + running) / 1.0);
    std::fprintf(stderr, "\rstudy %s: %zu done, %zu running, %zu left, %d failed, %s elapsed, ETA %s   ", printable(o_.name).c_str(),
                 done_before + done, running, left, failed, format_duration(secs).c_str(), eta.c_str());
    std::fflush(stderr);
  };
  // An error that no run can go on from (a run folder that cannot be made, a result that cannot be
  // written: a full disk, a read-only folder) stops the study; the main thread reports it.
  std::string fatal;
  auto worker = [&] {
    for (;;) {
      const RunSpec* r = nullptr;
      {
        std::lock_guard<std::mutex> lock(m);
        if (next >= todo.size() || interrupted() || !fatal.empty()) return;
        r = todo[next++];
        ++running;
        progress();
      }
      int rc = 1;
      bool stopped = false;
      std::string refused;  // why the run function refused the run, rather than running it
      try {
        std::error_code ec;
        fs::create_directories(r->dir, ec);
        if (ec || !fs::is_directory(r->dir, ec)) {
          // Name what is in the way: a file, a dangling or looping link, rather than errno's "File exists".
          std::string why = ec ? ec.message() : "a file is in the way";
          for (fs::path p = r->dir; !p.empty() && p != o_.dir && p != p.parent_path(); p = p.parent_path()) {
            std::error_code e2;
            const auto st = fs::symlink_status(p, e2);
            if (fs::is_symlink(st) && !fs::is_directory(fs::status(p, e2))) why = printable(p.string()) + " is a symbolic link that leads to no folder";
            else if (fs::exists(st) && !fs::is_directory(st) && !fs::is_symlink(st)) why = printable(p.string()) + " is a file, in the way";
          }
          throw std::runtime_error("cannot make the run folder " + printable(r->dir.string()) + ": " + why);
        }
        const bool resume = fs::is_regular_file(r->dir / "checkpoint.safetensors", ec);
        const auto s0 = std::chrono::steady_clock::now();
        try {
          rc = f(*r, RunContext{threads, resume});
        } catch (const std::exception& e) {
          refused = printable(e.what());
          std::lock_guard<std::mutex> lock(m);
          std::fprintf(stderr, "\nctgrad: study run %s seed %d failed: %s\n", printable(r->config).c_str(), r->seed, refused.c_str());
        }
        // The outcome, kept with the run's settings: its final validation, or how it failed (a
        // diverged or refused run is a result of the study: reported, and not retried unless asked).
        const Curve c = read_curve(r->dir / "metrics.jsonl");
        json sets = json::object();
        for (const auto& [k, v] : r->sets) sets[k] = v;
        json last = json::object();
        if (!c.values.empty())
          for (const auto& [k, v] : c.values.back()) last[k] = v;
        stopped = interrupted() && rc != 0;  // Ctrl-C: neither a result nor a failure; the run continues next time
        if (!stopped) {
          json outcome{{"config", r->config}, {"settings", sets}, {"seed", r->seed}, {"commit", o_.commit},
                       {"final_step", c.steps.empty() ? 0 : c.steps.back()}, {"metric", c.metric}, {"final", last},
                       {"train_seconds", c.seconds}, {"exit_code", rc},
                       {"wall_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count()}};
          if (!refused.empty()) outcome["refused"] = refused;
          checkpoint::write_atomically(r->dir / (rc == 0 ? "result.json" : "failed.json"),
                                       outcome.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
          if (rc == 0) fs::remove(r->dir / "failed.json", ec);
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(m);
        --running;
        const std::string why = e.what();
        if (fatal.empty())
          fatal = "the study cannot go on: run " + printable(r->config) + " seed " + std::to_string(r->seed) + ": " +
                  printable(why.rfind("ctgrad: ", 0) == 0 ? why.substr(8) : why);
        return;
      }
      std::lock_guard<std::mutex> lock(m);
      --running;
      done += !stopped;  // an interrupted run is left: the next call continues it
      if (rc != 0 && !stopped) {
        ++failed;
        if (refused.empty())
          std::fprintf(stderr, "\nctgrad: study run %s seed %d exited %d%s (its folder: %s)\n", printable(r->config).c_str(), r->seed, rc,
                       rc == 3 ? ": training diverged" : "", printable(r->dir.string()).c_str());
      }
      progress();
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < jobs; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  std::fprintf(stderr, "\n");
  if (!fatal.empty()) throw std::runtime_error("ctgrad: " + fatal);
  return failed;
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
    const json res = read_json(r.dir / "result.json");
    // A damaged result (damage() names it) counts as not run.
    if (!res.is_object() || !res.contains("final") || !res["final"].is_object() || !res["final"].contains(m) || !res["final"][m].is_number()) continue;
    s.finals[std::size_t(r.seed - 1)] = res["final"][m].get<double>();
    if (res.contains("train_seconds") && res["train_seconds"].is_number()) s.seconds += res["train_seconds"].get<double>();
    const json info = read_json(r.dir / "run.json");
    if (info.is_object() && info.contains("parameters") && info["parameters"].is_number_integer()) s.parameters = info["parameters"].get<std::int64_t>();
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

namespace {

std::string fixed(double v, int digits = 4) { return format_number(v, digits); }
std::string signed_fixed(double v, int digits = 4) { return format_number(v, digits, true); }
// RFC 4648 base64, for the PNGs inside results.html (15 lines: no Debian C++ library worth a
// dependency for it).
std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], k[v & 63]};
  }
  if (i + 1 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16;
    out += {k[v >> 18], k[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], '='};
  }
  return out;
}

}  // namespace

void Study::report() const {
  std::error_code lock_ec;
  if (fs::is_directory(o_.dir, lock_ec)) lock();
  const std::string m = metric();
  if (!o_.metric.empty()) {  // a metric the runs do not report would leave every row empty
    std::vector<std::string> logged;
    bool any = false;
    for (const RunSpec& r : runs_) {
      if (!succeeded(r)) continue;
      any = true;
      const json res = read_json(r.dir / "result.json");
      if (res.is_object() && res.contains("final") && res["final"].is_object())
        for (const auto& [k, v] : res["final"].items())
          if (std::find(logged.begin(), logged.end(), k) == logged.end()) logged.push_back(k);
    }
    if (any && std::find(logged.begin(), logged.end(), o_.metric) == logged.end()) {
      std::string list;
      for (const auto& k : logged) list += (list.empty() ? "" : ", ") + k;
      throw std::invalid_argument("ctgrad: the study's runs report no validation metric '" + o_.metric + "' (they report: " + list + ")");
    }
  }
  const std::vector<Summary> sums = summarize();
  const bool lower = lower_is_better();
  const fs::path dir = o_.dir;
  const std::vector<std::string> all_metrics = metrics();
  std::vector<std::vector<Summary>> per_metric;
  for (const std::string& name : all_metrics) per_metric.push_back(name == m ? sums : summarize(name));
  // results.csv: a row per configuration and metric.
  {
    std::vector<std::string> head{"config"};
    for (const Axis& a : o_.grid) head.push_back(a.key);
    for (const char* h : {"metric", "seeds", "mean", "sd", "ci95_low", "ci95_high", "diff_vs_baseline", "diff_ci95_low", "diff_ci95_high",
                          "train_seconds", "parameters"})
      head.emplace_back(h);
    for (int s = 1; s <= o_.seeds; ++s) head.push_back("seed" + std::to_string(s));
    std::string csv = csv_line(head);
    for (std::size_t k = 0; k < all_metrics.size(); ++k)
      for (const Summary& s : per_metric[k]) {
        std::vector<std::string> row{s.config};
        for (const auto& [key, v] : s.values) row.push_back(v);
        // Numbers in full (the shortest text that reads back as the same double): a CSV is read by programs.
        for (const std::string& f : {all_metrics[k], std::to_string(s.n), exact_number(s.mean), exact_number(s.sd), exact_number(s.mean - s.ci),
                                     exact_number(s.mean + s.ci), exact_number(s.diff), exact_number(s.diff - s.diff_ci),
                                     exact_number(s.diff + s.diff_ci), exact_number(s.seconds), std::to_string(s.parameters)})
          row.push_back(f);
        for (double v : s.finals) row.push_back(exact_number(v));
        csv += csv_line(row);
      }
    checkpoint::write_atomically(dir / "results.csv", csv);
  }
  // results.json: the compared metric's table, and every metric's.
  {
    auto table = [](const std::vector<Summary>& rows) {
      json arr = json::array();
      for (const Summary& s : rows) {
        json values = json::object();
        for (const auto& [k, v] : s.values) values[k] = v;
        json finals = json::array();
        for (double v : s.finals) finals.push_back(std::isnan(v) ? json(nullptr) : json(v));
        arr.push_back({{"config", s.config}, {"values", values}, {"seeds", s.n}, {"mean", s.mean}, {"sd", s.sd}, {"ci95", s.ci},
                       {"diff_vs_baseline", s.diff}, {"diff_ci95", s.diff_ci}, {"pairs", s.pairs}, {"train_seconds", s.seconds},
                       {"parameters", s.parameters}, {"finals", finals}});
      }
      return arr;
    };
    json every = json::object();
    for (std::size_t k = 0; k < all_metrics.size(); ++k)
      every[all_metrics[k]] = {{"lower_is_better", ablation::lower_is_better(all_metrics[k])}, {"configurations", table(per_metric[k])}};
    const json out{{"study", study_json(o_)}, {"metric", m}, {"lower_is_better", lower}, {"configurations", table(sums)}, {"metrics", every}};
    checkpoint::write_atomically(dir / "results.json", out.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  }
  // The plots: validation curves per configuration (mean over seeds, min-max band), and the final
  // metric per configuration with its 95% interval.
  {
    std::string data;
    std::string plot;
    int block = 0;
    for (std::size_t c = 0; c < sums.size(); ++c) {
      std::map<std::int64_t, std::vector<double>> at;  // step -> the seeds' values
      for (const RunSpec& r : runs_) {
        if (r.config != sums[c].config || !succeeded(r)) continue;
        const Curve cv = read_curve(r.dir / "metrics.jsonl");
        for (std::size_t i = 0; i < cv.steps.size(); ++i)
          if (auto it = cv.values[i].find(m); it != cv.values[i].end()) at[cv.steps[i]].push_back(it->second);
      }
      if (at.empty()) continue;
      std::string rows;
      for (const auto& [step, v] : at) {
        double mean = 0;
        for (double x : v) mean += x / double(v.size());
        rows += std::to_string(step) + " " + fixed(mean, 6) + " " + fixed(*std::min_element(v.begin(), v.end()), 6) + " " +
                fixed(*std::max_element(v.begin(), v.end()), 6) + "\n";
      }
      data += rows + "\n\n";
      const std::string title = gnuplot_quote(sums[c].config);
      plot += std::string(plot.empty() ? "plot " : ", ") + "$curves index " + std::to_string(block) + " using 1:3:4 with filledcurves fs transparent solid 0.2 lc " +
              std::to_string(c + 1) + " notitle, $curves index " + std::to_string(block) + " using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc " +
              std::to_string(c + 1) + " title " + title;
      ++block;
    }
    if (!plot.empty())
      gnuplot("set terminal pngcairo noenhanced size 900,520 font ',10'\nset output ARG1\n$curves << EOD\n" +
                  data + "EOD\nset key outside right\nset xlabel 'step'\nset ylabel " + gnuplot_quote("validation " + m) + "\nset title " +
                  gnuplot_quote(o_.name + ": validation " + m + " (mean over seeds, band: min-max)") + "\n" + plot + "\n",
              dir / "curves.png");
    // The data block holds numbers only; the configurations label the bars through set xtics.
    std::string bars, tics;
    for (std::size_t c = 0; c < sums.size(); ++c)
      if (sums[c].n) {
        bars += std::to_string(c) + " " + fixed(sums[c].mean, 6) + " " + fixed(std::isnan(sums[c].ci) ? 0.0 : sums[c].ci, 6) + "\n";
        tics += std::string(tics.empty() ? "" : ", ") + gnuplot_quote(sums[c].config) + " " + std::to_string(c);
      }
    if (!bars.empty())
      gnuplot("set terminal pngcairo noenhanced size 900,520 font ',10'\nset output ARG1\n$bars << EOD\n" + bars +
                  "EOD\nset style fill solid 0.5\nset boxwidth 0.6\nset xtics rotate by -30\nset xtics (" + tics + ")\nset ylabel " +
                  gnuplot_quote("final validation " + m) +
                  "\nset title " + gnuplot_quote(o_.name + ": final " + m + " per configuration (95% interval over seeds)") +
                  "\nset xrange [-0.6:" + std::to_string(sums.size() - 0.4) + "]\nplot $bars using 1:2 with boxes notitle, '' using 1:2:3 with yerrorbars lc rgb 'black' pt 0 notitle\n",
              dir / "final.png");
  }
  // results.md and results.html: the same table.
  const std::string better = lower ? "lower is better" : "higher is better";
  std::string md = "# " + markdown_text(o_.name) + "\n\n" + (o_.model.empty() ? "" : "Model " + markdown_code(o_.model) + "; ") + "metric: final validation " + markdown_text(m) + " (" + better +
                   "); " + std::to_string(o_.seeds) + " seeds; baseline: the first value of each grid key (" + markdown_code(sums.front().config) + ").";
  if (!o_.fixed.empty()) {
    md += " Fixed:";
    for (const auto& [k, v] : o_.fixed) md += " " + markdown_code(k + "=" + v);
    md += ".";
  }
  md += "\n\n| configuration | seeds | " + markdown_code(m) + " mean ± sd | 95% CI | vs baseline (paired) | 95% CI of the difference | train time | parameters |\n|---|---|---|---|---|---|---|---|\n";
  std::string rows_html;
  for (const Summary& s : sums) {
    const bool base = &s == &sums.front();
    const std::string diff = base ? "baseline" : s.pairs ? signed_fixed(s.diff) : "";
    const std::string dci = base || s.pairs < 2 ? "" : "[" + signed_fixed(s.diff - s.diff_ci) + ", " + signed_fixed(s.diff + s.diff_ci) + "]";
    const std::string ci = s.n < 2 ? "" : "[" + fixed(s.mean - s.ci) + ", " + fixed(s.mean + s.ci) + "]";
    const std::string mean = s.n ? fixed(s.mean) + (s.n > 1 ? " ± " + fixed(s.sd) : "") : "not run";
    const std::string secs = !s.n ? "" : s.seconds < 60 ? fixed(s.seconds, 1) + " s" : format_duration(s.seconds);
    const std::string params = s.parameters ? std::to_string(s.parameters) : "";
    const std::string seeds = std::to_string(s.n) + (s.failed ? " (" + std::to_string(s.failed) + " failed)" : "");
    md += "| " + markdown_code(s.config) + " | " + seeds + " | " + mean + " | " + ci + " | " + diff + " | " + dci + " | " + secs + " | " + params + " |\n";
    rows_html += "<tr><td><code>" + html_escape(s.config) + "</code></td><td>" + seeds + "</td><td>" + mean + "</td><td>" + ci + "</td><td>" +
                 diff + "</td><td>" + dci + "</td><td>" + secs + "</td><td>" + params + "</td></tr>\n";
  }
  for (std::size_t k = 1; k < all_metrics.size(); ++k) {
    const std::string& name = all_metrics[k];
    md += "\nValidation " + markdown_text(name) + " (" + (ablation::lower_is_better(name) ? "lower" : "higher") + " is better):\n\n| configuration | " + markdown_code(name) +
          " mean ± sd | vs baseline (paired) | 95% CI of the difference |\n|---|---|---|---|\n";
    rows_html += "<tr><th colspan='8' style='text-align:left'>validation " + html_escape(name) + "</th></tr>\n";
    for (const Summary& s : per_metric[k]) {
      const bool base = &s == &per_metric[k].front();
      const std::string mean = s.n ? fixed(s.mean) + (s.n > 1 ? " ± " + fixed(s.sd) : "") : "not run";
      const std::string diff = base ? "baseline" : s.pairs ? signed_fixed(s.diff) : "";
      const std::string dci = base || s.pairs < 2 ? "" : "[" + signed_fixed(s.diff - s.diff_ci) + ", " + signed_fixed(s.diff + s.diff_ci) + "]";
      md += "| " + markdown_code(s.config) + " | " + mean + " | " + diff + " | " + dci + " |\n";
      rows_html += "<tr><td><code>" + html_escape(s.config) + "</code></td><td>" + std::to_string(s.n) + "</td><td>" + mean + "</td><td></td><td>" + diff +
                   "</td><td>" + dci + "</td><td></td><td></td></tr>\n";
    }
  }
  if (o_.seeds > 1)
    md += "\nA difference whose interval excludes 0 is one the seeds agree on; with " + std::to_string(o_.seeds) + " seeds an interval is mean ± " +
          fixed(t975(o_.seeds - 1), 2) + " sd / sqrt(" + std::to_string(o_.seeds) + ") (Student's t).\n";
  std::error_code ec;
  for (const char* png : {"curves.png", "final.png"})
    if (fs::is_regular_file(dir / png, ec)) md += "\n![" + std::string(png) + "](" + png + ")\n";
  checkpoint::write_atomically(dir / "results.md", md);
  std::string html = "<!doctype html><html><head><meta charset='utf-8'><title>" + html_escape(o_.name) +
                     "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
                     "padding:4px 8px;text-align:right}td:first-child{text-align:left}</style></head><body><h1>" +
                     html_escape(o_.name) + "</h1><p>" + html_escape(o_.model.empty() ? "" : "Model " + o_.model + "; ") + "metric: final validation " +
                     html_escape(m) + " (" + better + "); " + std::to_string(o_.seeds) + " seeds; baseline " + html_escape(sums.front().config) +
                     ".</p><table><tr><th>configuration</th><th>seeds</th><th>mean ± sd</th><th>95% CI</th><th>vs baseline (paired)</th>"
                     "<th>95% CI of the difference</th><th>train time</th><th>parameters</th></tr>\n" + rows_html + "</table>\n";
  for (const char* png : {"curves.png", "final.png"})
    if (fs::is_regular_file(dir / png, ec)) html += "<p><img alt='" + std::string(png) + "' src='data:image/png;base64," + base64(read_text(dir / png)) + "'></p>\n";
  html += "</body></html>\n";
  checkpoint::write_atomically(dir / "results.html", html);
}

}  // namespace ctgrad::training::ablation
