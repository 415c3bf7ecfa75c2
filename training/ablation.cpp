#include <ctgrad/training/ablation.hpp>
#include <ctgrad/training/ablation_files.hpp>

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
using namespace files;

namespace {

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

}  // namespace

void record_parameters(const fs::path& run_dir, std::int64_t parameters, std::int64_t non_embedding_parameters) {
  json j{{"parameters", parameters}};
  if (non_embedding_parameters >= 0) j["non_embedding_parameters"] = non_embedding_parameters;
  checkpoint::write_atomically(run_dir / "run.json", j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
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
    configs = o_.one_at_a_time ? configs + a.values.size() - 1
                               : std::min<std::uint64_t>(configs * a.values.size(), kMaxRuns + 1);  // at most 10001 x a value count: no wrap
  }
  for (const auto& [k, v] : o_.fixed)
    if (keys.count(k)) throw std::invalid_argument("ctgrad: '" + k + "' is both a grid key and a fixed setting");
  auto size_text = [&] {
    std::string t = "this study is ";
    if (configs > kMaxRuns) {
      t += "more than " + std::to_string(kMaxRuns) + " configurations (";
      for (std::size_t k = 0; k < o_.grid.size(); ++k) t += (k ? (o_.one_at_a_time ? " + " : " x ") : "") + std::to_string(o_.grid[k].values.size());
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
  // Every combination, the last key fastest, or (one at a time) each key's other values in turn, the
  // other keys at their first; the baseline (all first values) first.
  std::vector<std::vector<std::size_t>> combos;
  std::vector<std::size_t> at(o_.grid.size(), 0);
  if (o_.one_at_a_time) {
    combos.push_back(at);
    for (std::size_t k = 0; k < o_.grid.size(); ++k)
      for (std::size_t v = 1; v < o_.grid[k].values.size(); ++v) {
        combos.push_back(at);
        combos.back()[k] = v;
      }
  } else {
    for (std::size_t c = 0; c < configs; ++c) {
      combos.push_back(at);
      for (std::size_t k = o_.grid.size(); k-- > 0;) {
        if (++at[k] < o_.grid[k].values.size()) break;
        at[k] = 0;
      }
    }
  }
  runs_.reserve(std::size_t(total));
  for (std::size_t c = 0; c < combos.size(); ++c) {
    std::string config, changed;
    std::vector<std::pair<std::string, std::string>> sets;
    for (std::size_t k = 0; k < o_.grid.size(); ++k) {
      const std::string& v = o_.grid[k].values[combos[c][k]];
      config += (config.empty() ? "" : ",") + o_.grid[k].key + "=" + v;
      if (combos[c][k]) changed = o_.grid[k].key + "=" + v;
      sets.emplace_back(o_.grid[k].key, v);
    }
    if (o_.one_at_a_time && c > 0) config = changed;  // the one key it changes
    sets.insert(sets.end(), o_.fixed.begin(), o_.fixed.end());
    char index[32];
    std::snprintf(index, sizeof index, "%03zu_", c);
    for (int s = 1; s <= o_.seeds; ++s)
      runs_.push_back({config, sets, s, o_.dir / "runs" / (index + folder_name(config)) / ("seed" + std::to_string(s))});
  }
}

void Study::lock() const {
  if (!lock_) lock_ = std::make_shared<FolderLock>(o_.dir, "study.lock", "the study folder", "another ctgrad ablate");
}

namespace {
// Refuses a study.json that is not this study's (a folder holding something else, or another study).
// Returns the seed count it records (0: none, a file of an older ctgrad).
int check_study_file(const fs::path& dir, const fs::path& file, const json& mine) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))  // a FIFO would block the read
    throw std::invalid_argument("ctgrad: " + printable(file.string()) + " is not a regular file: this folder holds something else; use another --run folder");
  const json theirs = read_json(file);
  if (theirs.is_discarded() || !theirs.is_object() || !theirs.contains("format"))
    throw std::invalid_argument("ctgrad: " + printable(file.string()) + " is not a study file ctgrad wrote: this folder holds something else; " +
                                "use another --run folder");
  auto same_fixed_order = [](json j) {  // fixed settings are a set: `--set a --set b` is `--set b --set a`; more seeds are the same study
    if (j.is_object() && j.contains("fixed") && j["fixed"].is_array()) std::sort(j["fixed"].begin(), j["fixed"].end());
    if (j.is_object()) j.erase("seeds");
    return j;
  };
  if (same_fixed_order(theirs) != same_fixed_order(mine))
    throw std::invalid_argument("ctgrad: " + printable(dir.string()) + " holds another study (" + printable(file.string()) + " differs: model, grid or fixed " +
                                "settings): use another --run folder");
  return theirs.contains("seeds") && theirs["seeds"].is_number_integer() ? theirs["seeds"].get<int>() : 0;
}
}  // namespace

StudyOptions Study::saved_options(const fs::path& dir) {
  const fs::path file = dir / "study.json";
  std::error_code ec;
  std::string why;
  const json j = fs::is_regular_file(file, ec) ? read_json(file, &why) : json(json::value_t::discarded);
  if (j.is_discarded())
    throw std::invalid_argument("ctgrad: " + printable(dir.string()) + " holds no study: " + printable(file.string()) + " " +
                                (why.empty() ? "is missing or not a file" : why));
  StudyOptions o;
  o.dir = dir;
  try {
    if (j.at("format") != "ctgrad-study-1") throw std::invalid_argument("an unknown format");
    o.model = j.at("model").get<std::string>();
    for (const json& a : j.at("grid")) o.grid.push_back({a.at("key").get<std::string>(), a.at("values").get<std::vector<std::string>>()});
    for (const json& f : j.at("fixed")) o.fixed.emplace_back(f.at(0).get<std::string>(), f.at(1).get<std::string>());
    o.one_at_a_time = j.value("design", "") == "one_at_a_time";
    if (j.contains("seeds")) o.seeds = j.at("seeds").get<int>();
    if (o.seeds < 1 || o.seeds > 100) throw std::invalid_argument("'seeds' is not 1 to 100");
  } catch (const std::exception& e) {
    throw std::invalid_argument("ctgrad: " + printable(file.string()) + " is not a study file ctgrad wrote (" + printable(e.what()) + ")");
  }
  o.name = o.model + ":";
  for (const Axis& a : o.grid) o.name += " " + a.key;
  return o;
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
    if (check_study_file(o_.dir, file, mine) < o_.seeds)  // (the most seeds any call asked for: --status lists them all)
      checkpoint::write_atomically(file, mine.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
    // This study's folder: its own files' temporaries a killed study left (its runs' folders clean their own).
    checkpoint::remove_stale_temporaries(o_.dir, [](const std::string& of) {
      for (const char* own : {"study.json", "results.md", "results.html", "results.csv", "results.json", "curves.png", "final.png"})
        if (of == own) return true;
      return false;
    });
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

namespace files {
std::vector<std::string> result_damage(const RunSpec& r, const std::string& compared_metric) {
  std::vector<std::string> out;
  do {
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
    const std::size_t found = out.size();
    for (const auto& [k, v] : res["final"].items())
      if (!v.is_number())
        out.push_back(where + ": 'final." + printable(k) + "' is " + (v.is_null() ? "null" : (v.is_array() || v.is_object() ? "an " : "a ") + std::string(v.type_name())) +
                      ", not a number");
    // What the run logged: its metric is among its finals; the study's compared metric is too.
    const std::string logged = res.contains("metric") && res["metric"].is_string() ? res["metric"].get<std::string>() : "";
    if (!res.contains("metric") || !res["metric"].is_string()) out.push_back(where + ": 'metric' is missing or not a string");
    else if (!res["final"].contains(logged)) out.push_back(where + ": 'metric' names '" + printable(logged) + "', which 'final' lacks");
    else if (!compared_metric.empty() && !res["final"].contains(compared_metric)) out.push_back(where + ": 'final' lacks the compared metric '" + printable(compared_metric) + "'");
    if (res.contains("train_seconds") &&
        (!res["train_seconds"].is_number() || !(res["train_seconds"].get<double>() >= 0 && res["train_seconds"].get<double>() < 1e9)))
      out.push_back(where + ": 'train_seconds' is not a duration (a number of seconds, 0 to 1e9)");
    if (out.size() != found) continue;
    // The result is this run's: its settings and seed, and the validation its folder still holds
    // (a folder trained again since, by the user or copied from another study, is not reported).
    json sets = json::object();
    for (const auto& [k, v] : r.sets) sets[k] = v;
    const auto text = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };  // (as result.json wrote them)
    if (!res.contains("settings") || text(res["settings"]) != text(sets) || !res.contains("seed") || res["seed"] != r.seed) {
      out.push_back(where + " is not this run's result (its settings or seed differ from " + printable(r.config) + " seed " + std::to_string(r.seed) + ")");
      continue;
    }
    const Curve c = read_curve(r.dir / "metrics.jsonl");
    bool same = !c.steps.empty() && res.contains("final_step") && res["final_step"] == c.steps.back() && res["final"].size() == c.values.back().size();
    for (const auto& [k, v] : c.values.empty() ? std::map<std::string, double>{} : c.values.back())
      same = same && res["final"].contains(k) && res["final"][k].is_number() && res["final"][k].get<double>() == v;
    if (!same) out.push_back(where + ": the run's metrics.jsonl no longer ends with this result (the folder was trained again or changed since)");
    const json info = read_json(r.dir / "run.json");
    if (info.is_object() && info.contains("parameters") && !parameter_count(info["parameters"]))
      out.push_back(printable((r.dir / "run.json").string()) + ": 'parameters' is not a count");
  } while (false);
  return out;
}
}  // namespace files

std::vector<std::string> Study::damage() const {
  std::vector<std::string> out;
  for (const RunSpec& r : runs_)
    if (succeeded(r))
      for (std::string& d : result_damage(r, o_.metric)) out.push_back(std::move(d));
  return out;
}

bool lower_is_better(const std::string& m) {
  // (a mixture of experts' terms, moe.balance / moe.z / moe.dropped, are costs too)
  return m.find("loss") != std::string::npos || m.find("error") != std::string::npos || m.find("nll") != std::string::npos ||
         m == "perplexity" || m == "ce" || m.rfind("moe.", 0) == 0;
}
bool Study::lower_is_better() const { return ablation::lower_is_better(metric()); }

RunOutcome Study::run_one(const RunSpec& r, const RunFn& f, int threads) const {
  RunOutcome out;
  std::error_code ec;
  fs::create_directories(r.dir, ec);
  if (ec || !fs::is_directory(r.dir, ec)) {
    // Name what is in the way: a file, a dangling or looping link, rather than errno's "File exists".
    std::string why = ec ? ec.message() : "a file is in the way";
    for (fs::path p = r.dir; !p.empty() && p != o_.dir && p != p.parent_path(); p = p.parent_path()) {
      std::error_code e2;
      const auto st = fs::symlink_status(p, e2);
      if (fs::is_symlink(st) && !fs::is_directory(fs::status(p, e2))) why = printable(p.string()) + " is a symbolic link that leads to no folder";
      else if (fs::exists(st) && !fs::is_directory(st) && !fs::is_symlink(st)) why = printable(p.string()) + " is a file, in the way";
    }
    throw std::runtime_error("cannot make the run folder " + printable(r.dir.string()) + ": " + why);
  }
  // One process at a time runs a run: a local study beside a Slurm task of the same study, or a
  // task Slurm started again while the one it requeued still saves, is refused, naming the holder.
  const FolderLock run_lock(r.dir, "run.lock", "the run folder", "another process of the study");
  if (fs::is_regular_file(r.dir / "result.json", ec)) return RunOutcome{0, false, ""};  // finished by another process since the caller looked
  const bool resume = fs::is_regular_file(r.dir / "checkpoint.safetensors", ec);
  const auto s0 = std::chrono::steady_clock::now();
  try {
    out.exit_code = f(r, RunContext{threads, resume});
  } catch (const std::exception& e) {
    out.exit_code = 1;
    out.refused = printable(e.what());
  }
  out.stopped = interrupted() && out.exit_code != 0;  // Ctrl-C, SIGTERM: neither a result nor a failure; the run continues next time
  if (out.stopped) return out;
  // The outcome, kept with the run's settings: its final validation, or how it failed (a diverged
  // or refused run is a result of the study: reported, and not retried unless asked).
  const Curve c = read_curve(r.dir / "metrics.jsonl");
  json sets = json::object();
  for (const auto& [k, v] : r.sets) sets[k] = v;
  json last = json::object();
  if (!c.values.empty())
    for (const auto& [k, v] : c.values.back()) last[k] = v;
  const int rc = out.exit_code;
  json outcome{{"config", r.config}, {"settings", sets}, {"seed", r.seed}, {"commit", o_.commit},
               {"final_step", c.steps.empty() ? 0 : c.steps.back()}, {"metric", c.metric}, {"final", last},
               {"train_seconds", c.seconds}, {"exit_code", rc},
               {"wall_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count()}};
  if (!out.refused.empty()) outcome["refused"] = out.refused;
  checkpoint::write_atomically(r.dir / (rc == 0 ? "result.json" : "failed.json"), outcome.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  if (rc == 0) fs::remove(r.dir / "failed.json", ec);
  return out;
}

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
      RunOutcome out;
      try {
        out = run_one(*r, f, threads);
        if (!out.refused.empty()) {
          std::lock_guard<std::mutex> lock(m);
          std::fprintf(stderr, "\nctgrad: study run %s seed %d failed: %s\n", printable(r->config).c_str(), r->seed, out.refused.c_str());
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
      const int rc = out.exit_code;
      const bool stopped = out.stopped;
      std::lock_guard<std::mutex> lock(m);
      --running;
      done += !stopped;  // an interrupted run is left: the next call continues it
      if (rc != 0 && !stopped) {
        ++failed;
        if (out.refused.empty())
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

}  // namespace ctgrad::training::ablation
