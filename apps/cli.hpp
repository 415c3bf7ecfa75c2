// What the ctgrad command's model commands share: options, config keys, checkpoint checks, the
// training log (progress bar, metrics files, loss plot) and Ctrl-C handling.
#pragma once
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctgrad/checkpoint/safetensors.hpp>

namespace ctgrad::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Bad command-line input: exit code 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::atomic<bool> g_interrupted{false};
inline void on_sigint(int) { g_interrupted = true; }

struct Args {
  std::string command, model, run_dir, config_file;
  std::vector<std::string> sets;  // "key=value", the config file's first
  bool resume = false;
  int threads = 0;
  // sample (gpt)
  std::string prompt = "And God said", end;
  bool slide = false;
  int tokens = 200, top_k = 0;
  double temperature = 0.8, top_p = 1.0;
  std::uint64_t seed = 1;
  // eval (transformer)
  std::string attention_png, sentence;
};

// Applies "key=value" with the type of the default; unknown keys are an error listing the known.
inline void set_key(json& cfg, const std::string& kv) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos) throw usage_error("--set expects key=value, got '" + kv + "'");
  const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
  if (!cfg.contains(key)) {
    std::string known;
    for (auto it = cfg.begin(); it != cfg.end(); ++it) known += (known.empty() ? "" : ", ") + it.key();
    throw usage_error("unknown config key '" + key + "' (known: " + known + ")");
  }
  try {
    if (cfg[key].is_string()) cfg[key] = value;
    else if (cfg[key].is_number_integer()) {
      std::size_t used = 0;
      cfg[key] = std::stoll(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } else {
      std::size_t used = 0;
      cfg[key] = std::stod(value, &used);
      if (used != value.size() || !std::isfinite(cfg[key].get<double>())) throw std::invalid_argument(value);
    }
  } catch (const std::logic_error&) {
    throw usage_error("config key '" + key + "' expects a " + std::string(cfg[key].type_name()) + ", got '" + value + "'");
  }
}
inline json apply_sets(json cfg, const Args& a) {
  for (const auto& s : a.sets) set_key(cfg, s);
  return cfg;
}

// The config a checkpoint was trained with, after checking it is one of `model`'s.
inline json checkpoint_config(const fs::path& ckpt, const std::string& model) {
  if (!fs::exists(ckpt)) throw usage_error("no checkpoint " + ckpt.string() + " (train first)");
  const checkpoint::File peek(ckpt);  // reads the header and validates the file
  const auto& meta = peek.metadata();
  if (!meta.count("model") || !meta.count("config"))
    throw usage_error(ckpt.string() + " was not written by `ctgrad train` (no model or config in its metadata)");
  if (meta.at("model") != model) throw usage_error(ckpt.string() + " is a checkpoint of model '" + meta.at("model") + "', not " + model);
  return json::parse(meta.at("config"));
}
// Resuming: these keys must be the checkpoint's.
inline void require_same(const json& saved, const json& cfg, std::initializer_list<const char*> keys, const fs::path& dir) {
  for (const char* k : keys)
    if (saved[k] != cfg[k])
      throw usage_error("the checkpoint in " + dir.string() + " has " + k + " " + saved[k].dump() + ", not " + cfg[k].dump() +
                        " (resume with the same config)");
}

inline std::string fmt_time(double s) {
  char b[32];
  if (s >= 60) std::snprintf(b, sizeof b, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(b, sizeof b, "%.0fs", s);
  return b;
}

// Loss curve to PNG with gnuplot, headless. A missing gnuplot is a warning, not a failure.
inline void plot(const fs::path& csv, const fs::path& png, const std::string& unit) {
  if (!fs::exists("/usr/bin/gnuplot")) {
    std::cerr << "ctgrad: warning: gnuplot not installed (apt-get install gnuplot-nox): no " << png << "\n";
    return;
  }
  const std::string cmd = "/usr/bin/gnuplot -e \"set terminal png size 800,500; set output '" + png.string() +
                          "'; set datafile separator ','; set key autotitle columnhead; set xlabel 'step'; set ylabel 'loss (" + unit +
                          ")'; plot '" + csv.string() + "' using 1:2 with lines title 'train', '' using 1:5 with linespoints title 'validation'\" 2>&1";
  if (std::system(cmd.c_str()) != 0) std::cerr << "ctgrad: warning: gnuplot failed to draw " << png << "\n";
}

// metrics.jsonl and metrics.csv (appended when resuming), the progress bar (plain lines when not
// a terminal), and the training clock, which evaluation and checkpointing do not count on.
class TrainingLog {
 public:
  TrainingLog(const fs::path& dir, bool resume, std::int64_t first, std::int64_t steps, std::string unit, std::string items = "tok")
      : jsonl_(dir / "metrics.jsonl", resume ? std::ios::app : std::ios::trunc),
        csv_(dir / "metrics.csv", resume ? std::ios::app : std::ios::trunc),
        first_(first), steps_(steps), unit_(std::move(unit)), items_(std::move(items)), tty_(::isatty(STDOUT_FILENO)),
        t0_(std::chrono::steady_clock::now()) {
    if (!resume) csv_ << "step,loss,lr," << items_ << "_per_s,val_loss\n";
    std::signal(SIGINT, on_sigint);
  }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count() - paused_; }
  template <class F>
  auto untimed(F f) {
    const auto s0 = std::chrono::steady_clock::now();
    auto r = f();
    paused_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    return r;
  }
  // After a step: `items` processed by it (tokens, sentences...), validation loss when measured.
  void step(std::int64_t step, double loss, double lr, double items, std::optional<double> val) {
    items_done_ += items;
    avg_ = avg_ < 0 ? loss : 0.9 * avg_ + 0.1 * loss;
    const double secs = seconds(), rate = items_done_ / secs;
    jsonl_ << json{{"step", step}, {"loss", loss}, {"lr", lr}, {items_ + "_per_s", rate}}.dump() << "\n";
    if (val) jsonl_ << json{{"step", step}, {"val_loss", *val}, {"train_seconds", secs}}.dump() << "\n";
    csv_ << step << ',' << loss << ',' << lr << ',' << rate << ',' << (val ? std::to_string(*val) : "") << "\n";
    csv_.flush();  // a run can be watched (and killed) at any step
    jsonl_.flush();
    const double eta = secs / double(step - first_ + 1) * double(steps_ - step);
    char line[200];
    const int width = 24, filled = int(width * step / steps_);
    std::snprintf(line, sizeof line, "[%s%s] step %lld/%lld  loss %.3f  %.0f %s/s  ETA %s", std::string(std::size_t(filled), '#').c_str(),
                  std::string(std::size_t(width - filled), '.').c_str(), (long long)step, (long long)steps_, avg_, rate, items_.c_str(),
                  fmt_time(eta).c_str());
    if (tty_) std::printf("\r%s", line), std::fflush(stdout);
    else if (step % 100 == 0 && !val) std::printf("%s\n", line), std::fflush(stdout);
    if (val) std::printf("%s%s  validation %.4f %s\n", tty_ ? "\n" : "", tty_ ? "" : line, *val, unit_.c_str()), std::fflush(stdout);
  }
  void close() {
    jsonl_.close();
    csv_.close();
  }

 private:
  std::ofstream jsonl_, csv_;
  std::int64_t first_, steps_;
  std::string unit_, items_;
  bool tty_;
  std::chrono::steady_clock::time_point t0_;
  double paused_ = 0, items_done_ = 0, avg_ = -1;
};

// After a step: on Ctrl-C, saves and says how to go on; the caller then exits with 130.
template <class Save>
bool stop_on_interrupt(std::int64_t step, Save save, const fs::path& ckpt) {
  if (!g_interrupted) return false;
  save();
  std::printf("\ninterrupted at step %lld: checkpoint saved to %s (continue with --resume)\n", (long long)step, ckpt.c_str());
  return true;
}

int gpt_command(const Args& a);          // gpt_command.cpp
int transformer_command(const Args& a);  // transformer_command.cpp
int vit_command(const Args& a);          // vit_command.cpp

}  // namespace ctgrad::cli
