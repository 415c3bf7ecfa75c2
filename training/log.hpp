// The training log: metrics.jsonl (every step, and every validation with all its metrics),
// metrics.csv (step, loss, lr, items/s, validation loss: what the plot reads), a progress bar
// on a terminal or a plain line every 100 steps otherwise, and a clock that evaluation and
// checkpointing do not count on. A resumed run first cuts both files back to the steps before
// the one it resumes at, so a run killed after its last checkpoint leaves no duplicated rows.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ctgrad/training/escape.hpp>

namespace ctgrad::training {

// Validation results; the first value is the loss the log and the plot show.
struct Metrics {
  std::vector<std::pair<std::string, double>> values;
  double loss() const { return values.empty() ? 0.0 : values.front().second; }
};

class TrainingLog {
 public:
  // `unit` names the loss ("nats/char"); `items` what a step processes ("tok", "img"). An empty
  // `dir`: a log that only keeps time (the other ranks of a data-parallel run).
  TrainingLog(const std::filesystem::path& dir, std::int64_t first, std::int64_t steps, std::string unit, std::string items);
  double seconds() const;  // training time so far, without evaluation and checkpoints
  template <class F>
  auto untimed(F f) {
    const auto s0 = std::chrono::steady_clock::now();
    auto r = f();
    paused_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    return r;
  }
  // After a step: `items` processed by it, the validation metrics when measured.
  void step(std::int64_t step, double loss, double lr, double items, const std::optional<Metrics>& val);
  void close();

 private:
  std::ofstream jsonl_, csv_;
  std::int64_t first_, steps_;
  std::string unit_, items_;
  bool tty_, quiet_ = false;
  std::chrono::steady_clock::time_point t0_;
  double paused_ = 0, items_done_ = 0, avg_ = -1;
  double seconds_before_ = 0;  // a resumed run: the training time of the records it keeps
};

// The loss curve (metrics.csv) as a PNG, with gnuplot; without gnuplot, a warning and no plot.
bool plot_loss(const std::filesystem::path& csv, const std::filesystem::path& png, const std::string& unit);  // whether it was drawn

// Runs a gnuplot script (written beside `png`, removed after) that draws `png`. Paths are never
// spliced into the script: it names its output ARG1 (`set output ARG1`) and `inputs` ARG2, ARG3,
// ... (at most 8), which gnuplot receives as arguments (gnuplot -c). Other strings go through
// gnuplot_quote (escape.hpp). False, with a warning naming the file, when gnuplot is missing or fails.
bool gnuplot(const std::string& script, const std::filesystem::path& png, const std::vector<std::filesystem::path>& inputs = {});

std::string format_duration(double seconds);  // "1m05s", "42s"

}  // namespace ctgrad::training
