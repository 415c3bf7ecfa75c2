#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/training/config.hpp>
#include <ctgrad/training/log.hpp>
#include <ctgrad/training/trainer.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ctgrad::training {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
std::string csv_row(std::int64_t step, double loss, double lr, double rate, std::optional<double> val) {
  // Numbers only (no field needs quoting), each as the stream writes it (6 significant digits).
  auto text = [](double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  return csv_line({std::to_string(step), text(loss), text(lr), text(rate), val ? text(*val) : ""});
}

// For a resumed run: metrics.jsonl keeps the records of the steps before `first` (a record that
// does not parse, lacks its fields or goes back in steps is dropped: a torn line of a killed run,
// or damage), and metrics.csv is rebuilt from them (it holds nothing the jsonl does not), so
// neither has a duplicated, out-of-order or garbage row, and a deleted CSV comes back.
void cut_back(const fs::path& dir, std::int64_t first, const std::string& items) {
  const fs::path jsonl = dir / "metrics.jsonl", csv = dir / "metrics.csv";
  std::string kept, rows = "step,loss,lr," + items + "_per_s,val_loss\n";
  const std::string rate_key = items + "_per_s";
  if (std::ifstream in(jsonl); in) {
    std::string line;
    std::int64_t last = 0;  // the last step record kept
    std::optional<std::string> pending;  // its CSV row, until its validation (if any) is read
    double loss = 0, lr = 0, rate = 0;
    bool validated = false;
    auto flush = [&](std::optional<double> val) {
      if (pending) rows += csv_row(last, loss, lr, rate, val), pending.reset();
    };
    while (std::getline(in, line)) {
      json r;
      try {
        r = json::parse(line);
      } catch (const std::exception&) {
        continue;
      }
      if (!r.is_object() || !r.contains("step") || !r["step"].is_number_integer()) continue;
      const std::int64_t step = r["step"].get<std::int64_t>();
      if (step >= first || step < 1) continue;
      const bool is_val = r.contains("val_loss") && r["val_loss"].is_number();
      const bool is_step = r.contains("loss") && r["loss"].is_number() && r.contains("lr") && r["lr"].is_number() &&
                           r.contains(rate_key) && r[rate_key].is_number();
      if (is_step && step > last) {
        flush(std::nullopt);
        last = step, loss = r["loss"].get<double>(), lr = r["lr"].get<double>(), rate = r[rate_key].get<double>();
        pending = "", validated = false;
      } else if (is_val && step == last && !validated) {
        flush(r["val_loss"].get<double>());
        validated = true;
      } else {
        continue;
      }
      kept += line + "\n";
    }
    flush(std::nullopt);
  }
  checkpoint::write_atomically(jsonl, kept);
  checkpoint::write_atomically(csv, rows);
}
}  // namespace

std::string format_duration(double s) {
  char b[48];
  if (!(s >= 0)) return "?";                                // negative or NaN: no duration
  if (s >= 3.6e8) return "more than 100000h";               // (past any run; an int would overflow)
  const auto t = static_cast<std::int64_t>(s);
  if (s >= 3600) std::snprintf(b, sizeof b, "%lldh%02lldm", (long long)(t / 3600), (long long)(t / 60 % 60));
  else if (s >= 60) std::snprintf(b, sizeof b, "%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
  else std::snprintf(b, sizeof b, "%.0fs", s);
  return b;
}

TrainingLog::TrainingLog(const fs::path& dir, std::int64_t first, std::int64_t steps, std::string unit, std::string items)
    : first_(first), steps_(steps), unit_(std::move(unit)), items_(std::move(items)), tty_(::isatty(STDOUT_FILENO)),
      t0_(std::chrono::steady_clock::now()) {
  if (dir.empty()) {  // another rank's: timing only
    quiet_ = true;
    return;
  }
  const bool resume = first > 1;
  for (const char* name : {"metrics.jsonl", "metrics.csv"}) {
    std::error_code ec;
    const auto st = fs::status(dir / name, ec);  // no throw on a symlink loop
    if ((ec && ec != std::errc::no_such_file_or_directory) || (fs::exists(st) && !fs::is_regular_file(st)))
      throw config_error((dir / name).string() + " is not a regular file" + (ec ? " (" + ec.message() + ")" : "") + ": move it away");
  }
  if (resume) {
    cut_back(dir, first, items_);
    // A resumed run's training time goes on from the kept records' (studies compare whole runs).
    std::ifstream in(dir / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const json r = json::parse(line, nullptr, false);
      if (r.is_object() && r.contains("train_seconds") && r["train_seconds"].is_number()) seconds_before_ = r["train_seconds"].get<double>();
    }
  }
  else {  // new files, not truncated in place: a link put at either name is replaced, its target kept
    checkpoint::write_atomically(dir / "metrics.jsonl", "");
    checkpoint::write_atomically(dir / "metrics.csv", "step,loss,lr," + items_ + "_per_s,val_loss\n");
  }
  jsonl_.open(dir / "metrics.jsonl", std::ios::app);
  csv_.open(dir / "metrics.csv", std::ios::app);
  if (!jsonl_ || !csv_) throw std::runtime_error("ctgrad: cannot write the metrics files in " + dir.string() + ": " + std::strerror(errno));
  t0_ = std::chrono::steady_clock::now();  // the training's time: not the reading and cutting of the records above
}

double TrainingLog::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count() - paused_;
}

void TrainingLog::step(std::int64_t step, double loss, double lr, double items, const std::optional<Metrics>& val) {
  items_done_ += items;
  avg_ = avg_ < 0 ? loss : 0.9 * avg_ + 0.1 * loss;
  if (quiet_) return;
  const double secs = seconds(), rate = items_done_ / std::max(secs, 1e-9);
  jsonl_ << json{{"step", step}, {"loss", loss}, {"lr", lr}, {items_ + "_per_s", rate}}.dump() << "\n";
  if (val) {
    json v{{"step", step}, {"train_seconds", secs + seconds_before_}};
    bool first = true;
    for (const auto& [name, x] : val->values) {
      // The first metric is also "val_loss" (the plots and the CSV read it), and "metric" names it.
      if (first) v["val_loss"] = x, v["metric"] = name;
      v["val_" + name] = x;
      first = false;
    }
    jsonl_ << v.dump() << "\n";
  }
  csv_ << csv_row(step, loss, lr, rate, val ? std::optional<double>(val->loss()) : std::nullopt);
  csv_.flush();  // a run can be watched (and killed) at any step
  jsonl_.flush();
  const double eta = secs / double(step - first_ + 1) * double(steps_ - step);
  char line[200];
  const int width = 24, filled = int(width * step / std::max<std::int64_t>(steps_, 1));
  std::snprintf(line, sizeof line, "[%s%s] step %lld/%lld  loss %.3f  %.0f %s/s  ETA %s", std::string(std::size_t(filled), '#').c_str(),
                std::string(std::size_t(width - filled), '.').c_str(), (long long)step, (long long)steps_, avg_, rate, items_.c_str(),
                format_duration(eta).c_str());
  if (tty_) std::printf("\r%s", line), std::fflush(stdout);
  else if (step % 100 == 0 && !val) std::printf("%s\n", line), std::fflush(stdout);
  if (val) {
    std::string extra;
    bool first = true;
    for (const auto& [name, x] : val->values) {
      if (!first) {
        char b[64];
        std::snprintf(b, sizeof b, ", %s %.4g", name.c_str(), x);
        extra += b;
      }
      first = false;
    }
    std::printf("%s%s  validation %.4f %s%s\n", tty_ ? "\n" : "", tty_ ? "" : line, val->loss(), unit_.c_str(), extra.c_str());
    std::fflush(stdout);
  }
}

void TrainingLog::close() {
  jsonl_.close();
  csv_.close();
}

bool gnuplot(const std::string& script, const fs::path& png, const std::vector<fs::path>& inputs) {
  if (inputs.size() > 8) throw std::invalid_argument("ctgrad: gnuplot() takes at most 8 input files");
  if (!fs::exists("/usr/bin/gnuplot")) {
    std::cerr << "ctgrad: warning: gnuplot not installed (apt-get install gnuplot-nox): no " << printable(png.string()) << "\n";
    return false;
  }
  std::error_code ec;
  if (fs::exists(fs::symlink_status(png, ec)) && !fs::is_regular_file(fs::symlink_status(png, ec))) {
    std::cerr << "ctgrad: warning: " << printable(png.string()) << (fs::is_symlink(fs::symlink_status(png, ec)) ? " is a symbolic link" : " is not a regular file")
              << ": not drawn\n";
    return false;
  }
  // Drawn into a temporary file renamed over the plot: a reader never sees half a PNG. The script,
  // gnuplot's output (shown if it fails) and the PNG go to new files of this process (O_EXCL: never
  // through a link or into a FIFO put at their names), whose descriptors, held open (their locks)
  // until the PNG has its name, say they are a live writer's; a run folder removes them once it is gone.
  std::string tmp, file, said;
  int script_fd = -1, out = -1, png_fd = -1;
  try {
    png_fd = checkpoint::create_temporary(png, tmp);
    script_fd = checkpoint::create_temporary(png.parent_path() / (png.filename().string() + ".gp"), file);
    out = checkpoint::create_temporary(png.parent_path() / (png.filename().string() + ".err"), said);
  } catch (const std::exception& e) {
    std::cerr << "ctgrad: warning: " << printable(e.what()) << ": no " << printable(png.string()) << "\n";
    for (int fd : {png_fd, script_fd}) if (fd >= 0) ::close(fd);
    for (const std::string* p : {&tmp, &file}) if (!p->empty()) fs::remove(*p, ec);
    return false;
  }
  auto close_all = [&] {
    for (int fd : {png_fd, script_fd, out}) ::close(fd);
  };
  const bool written = ::write(script_fd, script.data(), script.size()) == ssize_t(script.size());  // (gnuplot opens each by name)
  if (!written) {
    std::cerr << "ctgrad: warning: cannot write " << printable(file) << ": no " << printable(png.string()) << "\n";
    for (const std::string* p : {&tmp, &file, &said}) fs::remove(*p, ec);
    close_all();
    return false;
  }
  // Not std::system: it ignores SIGINT while it waits, so a Ctrl-C during a plot would be lost.
  // gnuplot runs as a child that is stopped on Ctrl-C, and after two minutes (a stuck terminal).
  // gnuplot -c SCRIPT OUTPUT INPUTS...: the paths reach the script as the strings ARG1, ARG2, ...
  std::vector<std::string> args{"gnuplot", "-c", file, tmp};
  for (const auto& p : inputs) args.push_back(p.string());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  bool drawn = false;
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {  // only async-signal-safe calls until exec
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // killed with its parent: no gnuplot left writing into the run folder
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out, 1), ::dup2(out, 2);  // its warnings ("empty x range") are not the command's
    ::execve("/usr/bin/gnuplot", argv.data(), environ);
    ::_exit(127);
  }
  if (child > 0) {
    int status = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      const pid_t r = ::waitpid(child, &status, WNOHANG);
      if (r == child) {
        drawn = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        break;
      }
      if (r < 0 && errno != EINTR) break;
      if (interrupted() || std::chrono::steady_clock::now() - t0 > std::chrono::minutes(2)) {
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // gnuplot's reason: the last line of its output (its error follows any warnings before it).
  std::string reason;
  if (std::ifstream f(said); f)
    for (std::string line; std::getline(f, line);)
      if (line.find_first_not_of(" ^\t\r") != std::string::npos) reason = line;
  fs::remove(said, ec);
  fs::remove(file, ec);
  if (drawn && fs::exists(tmp, ec)) {
    fs::rename(tmp, png, ec);
    drawn = !ec;
  } else {
    drawn = false;
  }
  fs::remove(tmp, ec);
  close_all();
  if (!drawn && !interrupted())
    std::cerr << "ctgrad: warning: gnuplot failed to draw " << printable(png.string()) << (reason.empty() ? "" : " (" + printable(reason.substr(0, 200)) + ")")
              << "\n";
  return drawn;
}

bool plot_loss(const fs::path& csv, const fs::path& png, const std::string& unit) {
  return gnuplot("set terminal png size 800,500 noenhanced\nset output ARG1\nset datafile separator ','\n" +
              std::string("set key autotitle columnhead\nset xlabel 'step'\nset ylabel ") + gnuplot_quote("loss (" + unit + ")") + "\n" +
              "plot ARG2 using 1:2 with lines title 'train', '' using 1:5 with linespoints title 'validation'\n",
          png, {csv});
}

}  // namespace ctgrad::training
