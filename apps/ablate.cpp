// ctgrad ablate <model> --grid key=a,b[,c] [--grid ...] | --vary key=a,b [--vary ...] [--seeds N] [--set key=value ...]
//                       [--jobs J] [--threads N] [--run DIR] [--metric M] [--max-runs N] [--yes] [--retry-failed]
// Every combination of the grid's values (--vary: the baseline and each key's other values alone) x seeds 1..N, each a `ctgrad train <model>` in a folder of
// the study (training::ablation::Study: resumable, several at once, a report with confidence
// intervals and paired differences). Each run is a child process: its own threads, its log in its
// folder, a crash or a refusal that fails one run and not the study.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <optional>
#include <set>
#include <thread>

#include <ctgrad/training/ablation.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/plot_data.hpp>

#include "git_commit.h"

#include "option_text.hpp"
#include "plugins.hpp"
#include "saved_config.hpp"
#include "task.hpp"

extern char** environ;

namespace ctgrad::cli {

namespace {

namespace ab = training::ablation;

const Task& find_model(const std::string& name) {
  for (const Task& t : tasks())
    if (t.name == name) return t;
  if (const std::string hint = missing_model_hint(name); !hint.empty()) throw config_error(hint);
  std::string list;
  for (const Task& t : tasks()) list += (list.empty() ? "" : ", ") + t.name;
  throw config_error("unknown model '" + name + "' (models: " + list + ")");
}

bool is_seed_key(const std::string& k) { return k == "seed" || k == "init_seed" || k == "data_seed" || k == "dropout_seed"; }

// A key of the model's schema; its values parsed as the schema's type and range (config_error naming them).
void check_setting(const Task& t, const std::string& key, const std::string& value, const std::string& where) {
  if (is_seed_key(key)) throw config_error(where + ": the study sets the seeds (seed 1..N, --seeds N): '" + key + "' cannot be set");
  Config c = t.schema.defaults();
  c.set(key + "=" + value, where);
}

// git's commit of the source tree this binary was built from ("-dirty": with local changes).
std::string build_commit() { return CTGRAD_GIT_COMMIT; }

// The environment of the runs: this one without an MPI launcher's variables, so that a run never
// joins (or waits for) a launcher's job (`ablate` itself is refused under a launcher).
std::vector<std::string> run_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view v(*e);
    bool launcher = false;
    for (const char* prefix : {"OMPI_", "ORTE_", "PMIX_", "PMI_", "PRTE_", "HYDRA_", "MPI_LOCALNRANKS", "MPI_LOCALRANKID"})
      launcher |= v.rfind(prefix, 0) == 0;
    if (!launcher) env.emplace_back(v);
  }
  return env;
}

// One run: `ctgrad train` as a child, its output appended to train.log in the run's folder.
// Ctrl-C reaches the child through the terminal; a SIGTERM to the study is passed on to it; and
// when the study dies (kill -9), the kernel sends the child SIGTERM (PR_SET_PDEATHSIG): it saves
// a checkpoint and stops, and the next `ctgrad ablate` continues it.
int train_child(const std::string& model, const ab::RunSpec& r, const ab::RunContext& ctx) {
  std::vector<std::string> args{"ctgrad", "train", model, "--run", r.dir.string(), ctx.resume ? "--resume" : "--overwrite", "--threads",
                                std::to_string(ctx.threads)};
  for (const auto& [k, v] : r.sets) args.insert(args.end(), {"--set", k + "=" + v});
  args.insert(args.end(), {"--set", "seed=" + std::to_string(r.seed)});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = run_environment();
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log = (r.dir / "train.log").string();
  // Never through a link, into a FIFO (it would block the study) or a device.
  std::string why;
  const int out = training::open_for_append(log, why);
  if (out < 0) throw std::runtime_error("cannot write " + training::printable(log) + ": " + why);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {  // only async-signal-safe calls until exec
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(130);  // the study died before the line above
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execve("/proc/self/exe", argv.data(), envp.data());
    ::_exit(127);
  }
  const int err = errno;
  ::close(out);
  if (child < 0) throw std::runtime_error("cannot start ctgrad train: " + std::string(std::strerror(err)));
  bool passed_on = false;
  for (;;) {
    int status = 0;
    const pid_t w = ::waitpid(child, &status, WNOHANG);
    if (w == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (w < 0 && errno != EINTR) return 1;
    if (training::interrupted() && !passed_on) ::kill(child, SIGTERM), passed_on = true;  // it saves a checkpoint and stops
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The config a run of the study trains: the defaults, its grid values and --set's, its seed.
Config run_config(const Task& t, const ab::RunSpec& r) {
  Config c = t.schema.defaults();
  for (const auto& [k, v] : r.sets) c.set(k + "=" + v, "--grid/--set");
  c.set("seed=" + std::to_string(r.seed), "the study");
  if (t.dependent_defaults) t.dependent_defaults(c);
  return c;
}

// A checkpoint in a run's folder is continued only when it is that run's: trained with exactly its
// config. Another one (a `ctgrad train` of the user's into the folder, other steps, another study's
// --set) would be reported as the study's run: refused, the folder left as it is.
void check_resumable(const Task& t, const ab::RunSpec& r) {
  const training::RunFolder folder(r.dir);
  const auto diff = run_config(t, r).differences(saved_config(t, folder.checkpoint()), training::Role::free);
  if (diff.empty()) return;
  std::string list;
  for (const auto& d : diff) list += (list.empty() ? "" : "; ") + d;
  throw config_error("the checkpoint in " + training::printable(r.dir.string()) + " is not this study's run: it was trained with " + list +
                     " (move the folder out of the study to keep it; without it, the run starts afresh)");
}

}  // namespace

int ablate(const std::vector<std::string>& rest) {
  if (rest.size() < 2 || rest[1].rfind("--", 0) == 0)
    throw config_error("usage: ctgrad ablate <model> --grid key=a,b [--grid ...] | --vary key=a,b [--vary ...] [--seeds N] [--set key=value ...] [--jobs J] [--run DIR] [--yes]");
  const Task& t = find_model(rest[1]);
  ab::StudyOptions o;
  o.model = t.name;
  o.seeds = 3;
  o.dir = "studies/" + t.name;
  o.commit = build_commit();
  std::string name;
  std::set<std::string> given;
  for (std::size_t i = 2; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= rest.size()) throw config_error(a + " needs a value");
      return rest[++i];
    };
    // An option of one value given twice is a mistake, not "the last wins" (train refuses it too);
    // --grid and --set repeat by design, and a key set twice is refused below.
    static const std::set<std::string> once{"--seeds", "--jobs", "--threads", "--max-runs", "--run", "--metric", "--name", "--yes", "--retry-failed"};
    if (once.count(a) && !given.insert(a).second) throw config_error(a + " is given twice");
    if (a == "--grid" || a == "--vary") {
      if (!o.grid.empty() && o.one_at_a_time != (a == "--vary"))
        throw config_error("give --grid (every combination) or --vary (each key alone), not both");
      o.one_at_a_time = a == "--vary";
      const std::string g = one_line(a, value());
      const auto eq = g.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == g.size()) throw config_error(a + " " + g + ": write key=a,b,...");
      ab::Axis axis{g.substr(0, eq), {}};
      for (std::size_t at = eq + 1; at <= g.size();) {
        const std::size_t comma = std::min(g.find(',', at), g.size());
        const std::string v = g.substr(at, comma - at);
        if (v.empty()) throw config_error(a + " " + g + ": an empty value");
        check_setting(t, axis.key, v, a + " " + g);
        axis.values.push_back(v);
        at = comma + 1;
      }
      o.grid.push_back(std::move(axis));
    } else if (a == "--set") {
      const std::string s = one_line("--set", value());
      const auto eq = s.find('=');
      if (eq == std::string::npos || eq == 0) throw config_error("--set " + s + ": write key=value");
      check_setting(t, s.substr(0, eq), s.substr(eq + 1), "--set " + s);
      o.fixed.emplace_back(s.substr(0, eq), s.substr(eq + 1));
    } else if (a == "--seeds") o.seeds = int(training::parse_integer(value(), "--seeds", {.min = 1, .max = 100}));
    else if (a == "--jobs") o.jobs = int(training::parse_integer(value(), "--jobs", {.min = 1, .max = 256}));
    else if (a == "--threads") o.threads = int(training::parse_integer(value(), "--threads", {.min = 0, .max = 4096}));
    else if (a == "--max-runs") o.max_runs = int(training::parse_integer(value(), "--max-runs", {.min = 1, .max = 1 << 20}));
    else if (a == "--run") {
      o.dir = one_line("--run", value());
      if (o.dir.empty()) throw config_error("--run needs a folder name, got ''");
    } else if (a == "--metric") o.metric = one_line("--metric", value());
    else if (a == "--name") name = one_line("--name", value());
    else if (a == "--yes") o.yes = true;
    else if (a == "--retry-failed") o.retry_failed = true;
    else
      throw config_error("unknown option '" + training::printable(a) + "' for ctgrad ablate (options: --grid, --vary, --seeds, --set, --jobs, --threads, --run, --metric, --name, " +
                         "--max-runs, --yes, --retry-failed)");
  }
  if (o.grid.empty()) throw config_error("ctgrad ablate " + t.name + " needs a grid: --grid key=a,b or --vary key=a,b (keys: ctgrad help " + t.name + ")");
  for (std::size_t i = 0; i < o.fixed.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (o.fixed[i].first == o.fixed[j].first) throw config_error("'" + o.fixed[i].first + "' is set twice with --set");
  for (const auto& [k, v] : o.fixed)
    for (const ab::Axis& a : o.grid)
      if (a.key == k) throw config_error("'" + k + "' is both in the " + (o.one_at_a_time ? "--vary keys" : "grid") + " and set with --set");
  if (name.empty()) {
    name = t.name + ":";
    for (const ab::Axis& a : o.grid) name += " " + a.key;
  }
  o.name = name;
  for (const ab::Axis& a : o.grid)  // the keys that change the model's size: the report's scaling plot
    for (const char* k : {"size", "d_model", "layers", "dec_layers", "d_ff", "embed", "hidden", "ffn_mult", "moe_experts", "patch"})
      if (a.key == k) o.size_keys.push_back(a.key);
  std::optional<ab::Study> study;
  try {
    study.emplace(o);
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  // Every configuration is opened once before anything runs (its model built, its hyperparameters
  // checked by the ops, its memory checked, the folders its runs write fitting the file system's
  // limits, the compared metric one it reports): a value no run could train is refused up front.
  for (std::size_t i = 0; i < study->runs().size(); i += std::size_t(o.seeds)) {
    if (training::interrupted()) return 130;  // (opening a large model's configurations takes seconds each)
    const ab::RunSpec& r = study->runs()[i];
    const Config c = run_config(t, r);
    std::vector<std::string> reported;
    try {
      for (int seed = 1; seed <= o.seeds; ++seed) (void)training::RunFolder(study->runs()[i + std::size_t(seed - 1)].dir);
      reported = t.open(c, Context{"check", training::RunFolder(r.dir), false, 1})->metrics();
    } catch (const std::exception& e) {
      throw config_error("the configuration " + r.config + " cannot run: " + std::string(e.what()));
    }
    if (!o.metric.empty() && std::find(reported.begin(), reported.end(), o.metric) == reported.end()) {
      std::string list;
      for (const auto& k : reported) list += (list.empty() ? "" : ", ") + k;
      throw config_error("--metric " + o.metric + ": the configuration " + r.config + " reports no validation metric '" + o.metric +
                         "' (it reports: " + list + ")");
    }
  }
  try {
    study->prepare();
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  std::size_t todo = 0;
  for (const auto& r : study->runs()) todo += !study->finished(r);
  std::printf("ctgrad ablate %s: %zu configurations x %d seeds = %zu runs (%zu to run), %d at a time, in %s\n", t.name.c_str(),
              study->runs().size() / std::size_t(o.seeds), o.seeds, study->runs().size(), todo, o.jobs, o.dir.c_str());
  std::fflush(stdout);
  const int failed = study->run([&](const ab::RunSpec& r, const ab::RunContext& ctx) {
    if (ctx.resume) check_resumable(t, r);
    return train_child(t.name, r, ctx);
  });
  try {
    study->report();
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  std::string also = "results.csv, results.json, results.html";
  for (const char* png : {"curves.png", "final.png", "scaling.png"})  // the plots drawn (not a link or a FIFO found at their names)
    if (std::error_code ec; std::filesystem::is_regular_file(std::filesystem::symlink_status(o.dir / png, ec))) also += std::string(", ") + png;
  std::printf("%s\nreport: %s (also %s)\n", training::interrupted() ? "interrupted: rerun the same command to continue the study" : "",
              training::printable((o.dir / "results.md").string()).c_str(), also.c_str());
  if (training::interrupted()) return 130;
  // A result.json edited or damaged since its run: named, left out of the report (written above).
  const std::vector<std::string> damage = study->damage();
  for (const std::string& d : damage) std::fprintf(stderr, "ctgrad: %s: left out of the report\n", d.c_str());
  if (!damage.empty())
    throw config_error(std::to_string(damage.size()) + " result" + (damage.size() == 1 ? " is" : "s are") +
                       " damaged (above): delete each damaged result.json and rerun the same command to run it again");
  // A study is complete when every run has its result; failed runs (failed.json) are kept and not
  // retried by the same command, since a diverged run is a result too, but the exit code says so.
  std::size_t unfinished = 0;
  for (const auto& r : study->runs()) unfinished += !study->succeeded(r);
  if (unfinished > 0) {
    std::string again = "ctgrad";
    for (const std::string& w : rest) again += " " + training::shell_quote(w);
    if (!o.retry_failed) again += " --retry-failed";
    std::fprintf(stderr, "ctgrad: the study is incomplete: %zu of %zu runs failed (%d in this call; each run's failed.json and train.log say why); "
                         "to run them again: %s\n", unfinished, study->runs().size(), failed, again.c_str());
    return 1;
  }
  return 0;
}

}  // namespace ctgrad::cli
