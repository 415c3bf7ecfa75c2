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
#include <atomic>

#include <ctgrad/training/ablation.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/log.hpp>
#include <ctgrad/training/plot_data.hpp>

#include "git_commit.h"

#include "ablate_slurm.hpp"
#include "ablate_status.hpp"
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
// `launcher`: the program that starts the ranks of a data-parallel run (srun and its options), or
// empty for one process.
int train_child(const std::string& model, const ab::RunSpec& r, const ab::RunContext& ctx, const std::vector<std::string>& launcher = {}) {
  std::error_code exe_error;
  const std::string exe = launcher.empty() ? "/proc/self/exe" : std::filesystem::read_symlink("/proc/self/exe", exe_error).string();
  std::vector<std::string> args = launcher;
  args.push_back(launcher.empty() ? "ctgrad" : exe);
  std::vector<std::string> own{"train", model, "--run", r.dir.string(), ctx.resume ? "--resume" : "--overwrite", "--threads",
                                std::to_string(ctx.threads)};
  args.insert(args.end(), own.begin(), own.end());
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
    if (launcher.empty()) ::execve("/proc/self/exe", argv.data(), envp.data());
    else ::execvpe(argv[0], argv.data(), envp.data());
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
    // It saves a checkpoint and stops; srun is sent USR2, which it forwards as it is (SIGTERM it would make SIGKILL).
    if (training::interrupted() && !passed_on) ::kill(child, launcher.empty() ? SIGTERM : SIGUSR2), passed_on = true;
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

// Slurm's warning before a time limit (sbatch --signal=B:USR1@120): save, stop, and requeue the task.
std::atomic<bool> g_time_limit{false};
extern "C" void on_time_limit(int) {
  g_time_limit = true;
  training::set_interrupted();
}

// `ctgrad ablate --slurm-task ARRAY_FILE`: one task of a study's job array (apps/ablate_slurm.hpp).
// Runs its run as a local study runs each (result.json or failed.json after); stopped by SIGTERM
// (scancel, preemption, `scontrol requeue`) the run saves a checkpoint and the task exits 130, and
// a requeued task continues it; warned of the time limit, it saves and requeues itself.
int slurm_task(const std::vector<std::string>& rest) {
  if (rest.size() != 3) throw config_error("usage: ctgrad ablate --slurm-task ARRAY_FILE (a task of a study's Slurm job array; ctgrad ablate --launcher slurm submits it)");
  // First: a warning that comes while the task starts must not end it (USR1's default action).
  struct sigaction sa {};
  sa.sa_handler = on_time_limit;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);
  const slurm::Task st = slurm::task_of(rest[2]);
  ab::StudyOptions o;
  try {
    o = ab::Study::saved_options(st.study_dir);
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  o.seeds = std::max(o.seeds, st.seeds), o.commit = build_commit(), o.yes = true, o.retry_failed = true;
  const Task& t = find_model(o.model);
  std::optional<ab::Study> study;
  try {
    study.emplace(o);
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  const ab::RunSpec* run = nullptr;
  for (const ab::RunSpec& r : study->runs())
    if (r.dir == st.run_dir) run = &r;
  if (!run) throw config_error("the study in " + training::printable(st.study_dir.string()) + " has no run " + training::printable(st.run_dir.string()));
  const char* job = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  std::printf("study %s: run %s seed %d, Slurm task %s_%s%s\n", training::printable(o.name).c_str(), training::printable(run->config).c_str(), run->seed,
              job ? job : "?", task ? task : "?", restarts ? (std::string(", restart ") + restarts).c_str() : "");
  std::fflush(stdout);
  if (study->succeeded(*run)) {
    std::printf("its result is there already: nothing to run\n");
    return 0;
  }
  std::vector<std::string> launcher;
  if (st.ranks > 1) {  // a data-parallel run: its ranks started by srun within the task's allocation, joined by PMIx
    launcher = {"srun", "--ntasks=" + std::to_string(st.ranks), "--cpus-per-task=" + std::to_string(st.cpus), "--kill-on-bad-exit=1"};
    if (!std::getenv("SLURM_MPI_TYPE")) launcher.push_back("--mpi=pmix");  // (the user's choice, when the environment makes one)
  }
  const ab::RunOutcome out = study->run_one(*run, [&](const ab::RunSpec& r, const ab::RunContext& ctx) {
    if (ctx.resume) check_resumable(t, r);
    return train_child(t.name, r, ctx, launcher);
  }, st.cpus);
  if (out.stopped) {
    if (g_time_limit) {
      const std::string why = slurm::requeue_self();
      std::printf("the time limit is near: checkpoint saved; %s\n",
                  why.empty() ? "the task is requeued and continues the run" : ("it could not be requeued (" + why + "): the study's command, rerun, continues it").c_str());
    } else {
      std::printf("stopped: checkpoint saved; a requeued task (or the study's command, rerun) continues the run\n");
    }
    return 130;
  }
  if (!out.refused.empty()) std::fprintf(stderr, "ctgrad: study run %s seed %d failed: %s\n", training::printable(run->config).c_str(), run->seed, out.refused.c_str());
  std::printf("%s (exit %d): %s\n", out.exit_code == 0 ? "done" : "failed", out.exit_code,
              training::printable((run->dir / (out.exit_code == 0 ? "result.json" : "failed.json")).string()).c_str());
  return out.exit_code;
}

// `ctgrad ablate --run DIR --status`.
int status_command(const std::vector<std::string>& rest) {
  std::string dir;
  bool status = false;
  for (std::size_t i = 1; i < rest.size(); ++i) {
    if (rest[i] == "--run" && i + 1 < rest.size() && dir.empty()) dir = one_line("--run", rest[++i]);
    else if (rest[i] == "--status" && !status) status = true;
    else throw config_error("usage: ctgrad ablate --run DIR --status (or ctgrad ablate <model> --grid ...): '" + training::printable(rest[i]) + "' is not expected here");
  }
  if (!status || dir.empty()) throw config_error("usage: ctgrad ablate --run DIR --status (or ctgrad ablate <model> --grid ...)");
  return ablate_status(dir);
}

// --wait: until no run of the study is in Slurm's queue, a progress line from the run folders and
// squeue. Slurm unreachable for a while is waited out (10 minutes); runs that Slurm holds and will
// not start by itself (held by a user or an administrator, or after a failed launch) end the wait.
int wait_for_queue(const ab::Study& study, const std::string& status) {
  const auto t0 = std::chrono::steady_clock::now();
  auto unreachable_since = t0;
  bool reachable = true;
  for (;;) {
    std::map<std::filesystem::path, slurm::Queued> queue;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    try {
      queue = slurm::queued(study.options().dir);
      reachable = true;
    } catch (const config_error& e) {
      if (reachable) unreachable_since = std::chrono::steady_clock::now(), reachable = false;
      if (std::chrono::steady_clock::now() - unreachable_since > std::chrono::minutes(10)) throw;
      std::fprintf(stderr, "\rctgrad: %s; asking again   ", message_of(e).c_str());
    }
    if (reachable) {
      std::fprintf(stderr, "\rstudy %s on Slurm: %s; waited %s   ", training::printable(study.options().name).c_str(), state_counts(run_states(study, queue, {})).c_str(),
                   training::format_duration(secs).c_str());
      if (queue.empty()) break;
      std::string stuck;
      std::size_t held = 0;
      for (const auto& [dir, q] : queue)
        if (slurm::held(q)) ++held, stuck = q.job + " (" + (q.reason.empty() || q.reason == "None" ? q.state : q.reason) + ")";
      if (held == queue.size()) {
        std::fprintf(stderr, "\n");
        throw config_error("Slurm holds the study's " + std::to_string(held) + " queued run" + (held == 1 ? "" : "s") + " and will not start them by itself (e.g. " +
                           training::printable(stuck) + "): release them (scontrol release JOB) or cancel them (scancel JOB), then run this command again");
      }
    }
    std::fflush(stderr);
    for (int i = 0; i < 20 + std::min(int(secs / 6), 100) && !training::interrupted(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (training::interrupted()) {
      std::fprintf(stderr, "\nstopped waiting: the runs go on in Slurm; %s shows them, and this command collects them\n", status.c_str());
      return 130;
    }
  }
  std::fprintf(stderr, "\n");
  return 0;
}

}  // namespace

int ablate(const std::vector<std::string>& rest) {
  if (rest.size() >= 2 && rest[1] == "--slurm-task") return slurm_task(rest);
  if (rest.size() >= 2 && (rest[1] == "--run" || rest[1] == "--status")) return status_command(rest);
  if (rest.size() < 2 || rest[1].rfind("--", 0) == 0)
    throw config_error("usage: ctgrad ablate <model> --grid key=a,b [--grid ...] | --vary key=a,b [--vary ...] [--seeds N] [--set key=value ...] [--jobs J] [--run DIR] [--yes]");
  const Task& t = find_model(rest[1]);
  ab::StudyOptions o;
  o.model = t.name;
  o.seeds = 3;
  o.dir = "studies/" + t.name;
  o.commit = build_commit();
  std::string name;
  std::string launcher = "local";
  slurm::Launch launch;
  bool wait = false;
  std::set<std::string> given;
  for (std::size_t i = 2; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= rest.size()) throw config_error(a + " needs a value");
      return rest[++i];
    };
    // An option of one value given twice is a mistake, not "the last wins" (train refuses it too);
    // --grid and --set repeat by design, and a key set twice is refused below.
    static const std::set<std::string> once{"--seeds", "--jobs", "--threads", "--max-runs", "--run", "--metric", "--name", "--yes", "--retry-failed",
                                            "--launcher", "--cpus-per-run", "--ranks-per-run", "--wait", "--shared-fs"};
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
    else if (a == "--launcher") {
      launcher = value();
      if (launcher != "local" && launcher != "slurm") throw config_error("--launcher " + training::printable(launcher) + ": local or slurm");
    } else if (a.rfind("--slurm-arg=", 0) == 0) launch.sbatch_args.push_back(one_line("--slurm-arg", a.substr(12)));
    else if (a == "--slurm-arg") launch.sbatch_args.push_back(one_line(a, value()));
    else if (a == "--cpus-per-run") launch.cpus = int(training::parse_integer(value(), a, {.min = 1, .max = 4096}));
    else if (a == "--ranks-per-run") launch.ranks = int(training::parse_integer(value(), a, {.min = 1, .max = 4096}));
    else if (a == "--wait") wait = true;
    else if (a == "--shared-fs") launch.shared_fs = true;
    else
      throw config_error("unknown option '" + training::printable(a) + "' for ctgrad ablate (options: --grid, --vary, --seeds, --set, --jobs, --threads, --run, --metric, --name, " +
                         "--max-runs, --yes, --retry-failed, --launcher, --slurm-arg, --cpus-per-run, --ranks-per-run, --wait, --shared-fs; " +
                         "ctgrad ablate --run DIR --status)");
  }
  if (launcher == "local") {
    if (!launch.sbatch_args.empty()) given.insert("--slurm-arg");
    for (const char* only : {"--slurm-arg", "--cpus-per-run", "--ranks-per-run", "--wait", "--shared-fs"})
      if (given.count(only)) throw config_error(std::string(only) + " is for a study on Slurm: add --launcher slurm");
  }
  if (launcher == "slurm" && given.count("--threads"))
    throw config_error("--threads divides this machine's cores between local runs: on Slurm give each run's cores with --cpus-per-run");
  if (launcher == "slurm" && given.count("--jobs")) launch.throttle = o.jobs;
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
  if (launcher == "slurm") judge_memory_elsewhere();  // the nodes' memory is not this login node's
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
      reported = t.open(c, Context{"check", training::RunFolder(r.dir), false, {}, 1})->metrics();
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
  if (launcher == "slurm") slurm::check_cluster(std::filesystem::absolute(o.dir), launch);  // before the study folder is made
  try {
    study->prepare();
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  // Runs that Slurm holds (submitted by an earlier call) are neither run here nor submitted again.
  const auto held = slurm::queued(o.dir);
  if (launcher == "local" && !held.empty())
    throw config_error("the study's runs are in Slurm's queue (" + std::to_string(held.size()) + " runs, job " + held.begin()->second.job.substr(0, held.begin()->second.job.find('_')) +
                       "): collect them with the same command and --launcher slurm (add --wait), or scancel the job first");
  std::vector<const ab::RunSpec*> todo;
  for (const auto& r : study->runs())
    if (!study->finished(r) && !held.count(r.dir)) todo.push_back(&r);
  const std::string at_once = launcher == "local" ? ", " + std::to_string(o.jobs) + " at a time" : "";
  const std::string queue_part = launcher == "local" ? "" : ", " + std::to_string(held.size()) + " in Slurm's queue";
  std::printf("ctgrad ablate %s: %zu configurations x %d seeds = %zu runs (%zu to %s%s)%s, in %s\n", t.name.c_str(), study->runs().size() / std::size_t(o.seeds),
              o.seeds, study->runs().size(), todo.size(), launcher == "local" ? "run" : "submit", queue_part.c_str(), at_once.c_str(),
              training::printable(o.dir.string()).c_str());
  std::fflush(stdout);
  int failed = 0;
  if (launcher == "local") {
    failed = study->run([&](const ab::RunSpec& r, const ab::RunContext& ctx) {
      if (ctx.resume) check_resumable(t, r);
      return train_child(t.name, r, ctx);
    });
  } else if (!todo.empty() || !held.empty()) {
    if (!todo.empty()) {
      const std::vector<std::string> jobs = slurm::submit(*study, todo, launch);
      std::string list;
      for (const auto& j : jobs) list += (list.empty() ? "" : ", ") + j;
      std::printf("submitted to Slurm as job %s: %zu array tasks, %d CPU%s and %d rank%s each%s\n", list.c_str(), todo.size(), launch.cpus,
                  launch.cpus == 1 ? "" : "s", launch.ranks, launch.ranks == 1 ? "" : "s",
                  launch.throttle > 0 ? (", at most " + std::to_string(launch.throttle) + " at once").c_str() : "");
    }
    const std::string status = "ctgrad ablate --run " + training::shell_quote(o.dir.string()) + " --status";
    if (!wait) {
      std::printf("%s shows each run; run this command again (or with --wait) for the report once they have ended\n", status.c_str());
      return 0;
    }
    if (const int rc = wait_for_queue(*study, status); rc != 0) return rc;
    std::size_t ended = 0;
    for (const auto& r : study->runs()) ended += !study->finished(r);
    if (ended > 0)
      std::fprintf(stderr, "ctgrad: %zu runs left Slurm's queue without a result (cancelled, their node lost, or their task failed before the run: %s says "
                           "how far each got and names its task's log): run this command again to submit them again; they continue from their checkpoints\n",
                   ended, status.c_str());
  }
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
  std::size_t unfinished = 0, without_outcome = 0;
  for (const auto& r : study->runs()) {
    unfinished += !study->succeeded(r);
    without_outcome += !study->succeeded(r) && !std::filesystem::is_regular_file(r.dir / "failed.json");
  }
  if (unfinished > 0) {
    std::string again = "ctgrad";
    for (const std::string& w : rest) again += " " + training::shell_quote(w);
    if (unfinished == without_outcome)
      std::fprintf(stderr, "ctgrad: the study is incomplete: %zu of %zu runs have no result yet; to run them: %s\n", unfinished, study->runs().size(), again.c_str());
    else {
      if (!o.retry_failed) again += " --retry-failed";
      const std::string here = launcher == "local" ? " (" + std::to_string(failed) + " in this call)" : "";
      std::fprintf(stderr, "ctgrad: the study is incomplete: %zu of %zu runs failed%s; each run's failed.json and train.log say why%s; "
                           "to run them again: %s\n", unfinished - without_outcome, study->runs().size(), here.c_str(),
                   without_outcome ? ("; " + std::to_string(without_outcome) + " have no result yet").c_str() : "", again.c_str());
    }
    return 1;
  }
  return 0;
}

}  // namespace ctgrad::cli
