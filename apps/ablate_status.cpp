#include "ablate_status.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include <ctgrad/training/ablation_files.hpp>
#include <ctgrad/training/config.hpp>
#include <ctgrad/training/escape.hpp>

#include "task.hpp"

namespace ctgrad::cli {

namespace fs = std::filesystem;
namespace ab = training::ablation;
using json = nlohmann::json;
using training::printable;

namespace {

// The last step a run logged (its metrics.jsonl), or -1.
long long last_step(const fs::path& run_dir) {
  std::error_code ec;
  const fs::path log = run_dir / "metrics.jsonl";
  if (!fs::is_regular_file(log, ec)) return -1;
  std::ifstream f(log);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<long long>(f.tellg());
  f.seekg(std::max(0LL, size - 65536));  // the tail is enough: lines are short
  long long step = -1;
  for (std::string line; std::getline(f, line);) {
    const json r = json::parse(line, nullptr, false);
    if (r.is_object() && r.contains("step") && r["step"].is_number_integer()) step = r["step"].get<long long>();
  }
  return step;
}

// Whether a process holds the run's lock now (Study::run_one takes it while the run trains).
bool in_progress(const fs::path& run_dir) {
  const int fd = ::open((run_dir / "run.lock").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  const bool busy = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return busy;
}

std::string number(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.4g", v);
  return s;
}

}  // namespace

std::vector<RunState> run_states(const ab::Study& study, const std::map<fs::path, slurm::Queued>& queue, const std::map<fs::path, std::string>& accounting,
                                 const std::map<fs::path, std::string>& tasks) {
  std::vector<RunState> out;
  std::error_code ec;
  for (const ab::RunSpec& r : study.runs()) {
    RunState s{&r, "", ""};
    const auto q = queue.find(r.dir);
    const auto acct = accounting.find(r.dir);
    const long long step = last_step(r.dir);
    if (fs::is_regular_file(r.dir / "result.json", ec)) {
      s.state = "done";
      const json j = ab::files::read_json(r.dir / "result.json");
      if (j.is_object() && j.contains("metric") && j["metric"].is_string() && j.contains("final") && j["final"].is_object() &&
          j["final"].contains(j["metric"].get<std::string>()) && j["final"][j["metric"].get<std::string>()].is_number())
        s.detail = printable(j["metric"].get<std::string>()) + " " + number(j["final"][j["metric"].get<std::string>()].get<double>()) +
                   (j.contains("final_step") && j["final_step"].is_number_integer() ? " at step " + std::to_string(j["final_step"].get<long long>()) : "");
    } else if (q != queue.end()) {  // (a failed run submitted again with --retry-failed is queued, not failed)
      const bool running = q->second.state == "RUNNING" || q->second.state == "COMPLETING" || q->second.state == "CONFIGURING";
      s.state = running ? "running" : "pending";
      s.detail = "Slurm job " + q->second.job + (running || q->second.state == "PENDING" ? "" : " " + printable(q->second.state)) +
                 (running || q->second.reason.empty() || q->second.reason == "None" ? "" : " (" + printable(q->second.reason) + ")");
      if (step >= 0) s.detail += ", at step " + std::to_string(step);
    } else if (in_progress(r.dir)) {  // a local study's run, or a task squeue no longer lists that still ends
      s.state = "running";
      s.detail = step >= 0 ? "at step " + std::to_string(step) : "starting";
    } else if (fs::is_regular_file(r.dir / "failed.json", ec)) {
      s.state = "failed";
      const json j = ab::files::read_json(r.dir / "failed.json");
      const int rc = j.is_object() && j.contains("exit_code") && j["exit_code"].is_number_integer() ? j["exit_code"].get<int>() : -1;
      s.detail = "exit " + std::to_string(rc) + (rc == 3 ? " (training diverged)" : "");
      if (j.is_object() && j.contains("refused") && j["refused"].is_string()) s.detail += ": " + training::shortened(j["refused"].get<std::string>(), 160);
      s.detail += "; see its train.log; --retry-failed runs it again";
    } else if (fs::is_regular_file(r.dir / "checkpoint.safetensors", ec)) {
      s.state = "stopped";
      s.detail = "a checkpoint" + (step >= 0 ? " (its log reaches step " + std::to_string(step) + ")" : std::string()) + "; the study's command continues it";
    } else {
      s.state = "not started";
    }
    if (s.state == "stopped" || s.state == "not started") {  // how its task ended, where Slurm keeps accounting, and the task's log
      if (acct != accounting.end()) s.detail += (s.detail.empty() ? "" : "; ") + std::string("Slurm: ") + printable(acct->second);
      if (const auto task = tasks.find(r.dir); task != tasks.end()) s.detail += (s.detail.empty() ? "" : "; ") + std::string("its last task's log: slurm/logs/") + task->second + ".log";
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string state_counts(const std::vector<RunState>& states) {
  std::string out;
  for (const char* k : {"done", "failed", "running", "pending", "stopped", "not started"}) {
    std::size_t n = 0;
    for (const auto& s : states) n += s.state == k;
    if (n) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + k;
  }
  return out;
}

int ablate_status(const fs::path& dir) {
  ab::StudyOptions o;
  try {
    o = ab::Study::saved_options(dir);
  } catch (const std::invalid_argument& e) {
    throw training::config_error(e.what());
  }
  o.seeds = std::max(o.seeds, slurm::seeds_of(dir));
  o.yes = true;
  const ab::Study study(o);
  std::map<fs::path, slurm::Queued> queue;
  std::string unreachable;
  try {
    queue = slurm::queued(dir);
  } catch (const training::config_error& e) {
    unreachable = message_of(e);  // the folders' states still say much
  }
  const auto states = run_states(study, queue, slurm::accounting(dir), slurm::last_tasks(dir));
  std::printf("study %s in %s: %zu runs: %s\n", printable(o.name).c_str(), printable(dir.string()).c_str(), states.size(), state_counts(states).c_str());
  if (!unreachable.empty()) std::printf("  (without Slurm's queue: %s)\n", unreachable.c_str());
  std::size_t width = 0;
  for (const auto& s : states) width = std::max(width, fs::relative(s.run->dir, dir / "runs").string().size());
  for (const auto& s : states)
    std::printf("  %-*s  %-11s  %s\n", int(width), printable(fs::relative(s.run->dir, dir / "runs").string()).c_str(), s.state.c_str(), s.detail.c_str());
  return 0;
}

}  // namespace ctgrad::cli
