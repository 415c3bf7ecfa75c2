// Ablation studies: a grid of configurations x seeds, each run in a folder of its own, resumable,
// several at once; then a report with confidence intervals and paired differences.
//
//   ablation::StudyOptions o{.name = "gpt norm", .grid = {{"norm", {"pre", "post"}}, {"lr", {"1e-3", "3e-3"}}},
//                            .seeds = 3, .dir = "studies/norm", .jobs = 2};
//   ablation::Study study(o);
//   study.run([](const ablation::RunSpec& r, const ablation::RunContext& ctx) {
//     ... train with r.sets and r.seed into r.dir on ctx.threads threads (resume if ctx.resume) ...
//     return 0;                                  // non-zero: the run failed (the study goes on)
//   });
//   study.report();                              // results.md .csv .json .html, curves.png, final.png
//
// A run is what the study asks of a model: its settings (the grid's values and the fixed ones, as
// key=value) and a seed, which pairs runs across configurations (same data order, same initial
// weights where the architecture allows). The run writes its metrics.jsonl (training::TrainingLog's
// format) into its folder; the study reads the validation metrics from it and, when the run
// returns, records result.json there (failed.json with its exit code when it fails: a diverged
// run is a result too). A folder with either is finished and skipped (a failed one is retried
// with retry_failed); one with a checkpoint but neither is continued (ctx.resume). The study's folder holds study.json:
// a folder holding another study is refused, and nothing finished is ever overwritten.
//
// Statistics, per configuration: the final value of the metric over seeds (mean, sd, a 95%
// confidence interval from Student's t); and against the baseline configuration (the first value
// of every grid key) the paired difference over the seeds both have, with its own interval.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ctgrad::training {
class FolderLock;  // training/folder_lock.hpp
}

namespace ctgrad::training::ablation {

// The most runs (configurations x seeds) a study holds, with --yes or not.
inline constexpr std::uint64_t kMaxRuns = 10000;

struct Axis {
  std::string key;
  std::vector<std::string> values;  // the first is the baseline
};

struct StudyOptions {
  std::string name;                                         // shown in the report
  std::string model;                                        // recorded (the CLI's model)
  std::vector<Axis> grid;
  bool one_at_a_time = false;                               // the baseline and each key's other values alone, not every combination
  int seeds = 3;                                            // seeds 1 .. seeds
  std::vector<std::pair<std::string, std::string>> fixed;   // settings of every run
  std::filesystem::path dir;                                // the study's folder
  int jobs = 1;                                             // runs at once
  int threads = 0;                                          // cores for the whole study (0: all), split between the jobs
  std::string metric;                                       // the validation metric compared ("" : the first one logged, the loss)
  int max_runs = 48;                                        // more runs than this need `yes` (at most kMaxRuns in any case)
  bool yes = false;
  bool retry_failed = false;                                // run again the runs that failed (diverged, refused)
  std::string commit;                                       // recorded in each run's result (the build's git commit)
  // Grid keys that change the model's size (d_model, layers): when one varies, the report plots
  // the metric against non-embedding parameters, log-log, with a fitted power law.
  std::vector<std::string> size_keys;
};

struct RunSpec {
  std::string config;                                       // "norm=post,lr=3e-3"
  std::vector<std::pair<std::string, std::string>> sets;    // the grid's values, then the fixed ones
  int seed = 1;
  std::filesystem::path dir;
  // The value this run sets for `key`; std::invalid_argument naming it when there is none.
  const std::string& value(const std::string& key) const;
};

struct RunContext {
  int threads = 1;
  bool resume = false;  // the folder holds a checkpoint of this run: continue it
};

using RunFn = std::function<int(const RunSpec&, const RunContext&)>;

// What became of one run (Study::run_one).
struct RunOutcome {
  int exit_code = 1;
  bool stopped = false;     // interrupted (Ctrl-C, SIGTERM): neither result nor failure recorded; the next call continues it
  std::string refused;      // why the run function threw rather than ran, if it did
};

struct Summary {
  std::string config;
  std::vector<std::pair<std::string, std::string>> values;  // the grid's values of this configuration
  std::vector<double> finals;                               // per seed (NaN: not finished)
  int n = 0;
  double mean = 0, sd = 0, ci = 0;                          // ci: the 95% interval's half-width
  double diff = 0, diff_ci = 0;                             // paired, against the baseline
  int pairs = 0;
  double seconds = 0;                                       // mean training time
  std::int64_t parameters = 0;
  std::int64_t non_embedding_parameters = 0;                // without token and position tables (0: not recorded)
  int failed = 0;                                           // seeds whose run failed (diverged, refused)
};

class Study {
 public:
  // Checks the options (an empty grid, a key twice, a value twice, too many runs without `yes`:
  // std::invalid_argument naming it).
  explicit Study(StudyOptions o);
  const StudyOptions& options() const { return o_; }
  // Every configuration x seed, baseline first.
  const std::vector<RunSpec>& runs() const { return runs_; }
  // Creates the folder and study.json, or checks that the one there is this study.
  void prepare() const;
  // The options a study folder's study.json records (model, grid, fixed settings, design, the most
  // seeds asked for; jobs and the rest at their defaults); std::invalid_argument naming the file
  // when it holds none. For a launcher's task and --status, which run beside the study's command.
  static StudyOptions saved_options(const std::filesystem::path& dir);
  // Runs every run that is not finished, options().jobs at a time, with a one-line progress view
  // (done / running / left, ETA). Returns how many failed. Stops starting new runs on Ctrl-C.
  int run(const RunFn& f) const;
  // One run as run() runs each: makes its folder, calls f (ctx.resume when it holds a checkpoint)
  // and records result.json or failed.json (nothing when interrupted). std::runtime_error when the
  // folder cannot be made or the outcome written.
  RunOutcome run_one(const RunSpec& r, const RunFn& f, int threads) const;
  // Per configuration, from the run folders (finished runs only): the final value of `metric`
  // (empty: metric()).
  std::vector<Summary> summarize(const std::string& metric = "") const;
  // results.md, results.csv, results.json, results.html (self-contained), curves.png, final.png,
  // and scaling.png when a size key varies.
  void report() const;

  // A run is finished when it has a result, or failed (unless retry_failed); succeeded: a result.
  bool finished(const RunSpec& r) const;
  bool succeeded(const RunSpec& r) const;
  // The metric the study compares, and whether lower is better (a loss).
  std::string metric() const;
  bool lower_is_better() const;
  // Every validation metric the finished runs report, metric() first.
  std::vector<std::string> metrics() const;
  // The finished runs' result.json files that are damaged (not JSON, a final value that is not a
  // number), one line each naming the file and the key; report() leaves them out.
  std::vector<std::string> damage() const;

 private:
  StudyOptions o_;
  std::vector<RunSpec> runs_;
  // The study folder's lock, taken by prepare() and report() and held while the Study lives: a
  // second Study on the same folder (another `ctgrad ablate`) is refused, naming the holder's pid.
  mutable std::shared_ptr<FolderLock> lock_;
  void lock() const;
};

// For run functions: records the run's parameter count, and without the embedding tables when
// given (run.json in its folder, as `ctgrad train` writes it), which the report shows.
void record_parameters(const std::filesystem::path& run_dir, std::int64_t parameters, std::int64_t non_embedding_parameters = -1);

// Whether a metric is better lower (a loss, an error rate, a perplexity).
bool lower_is_better(const std::string& metric);

// Student's t quantile t_{0.975, df} (the 95% two-sided interval), df >= 1.
double t975(int df);

}  // namespace ctgrad::training::ablation
