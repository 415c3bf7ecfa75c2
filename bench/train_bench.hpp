#pragma once
#include <string>

struct TrainBenchOptions {
  std::string config = "small", peer;  // peer: "" or "libtorch"
  std::string precision = "fp32";      // of ctgrad's matmuls: fp32, bf16, or both (alternating rounds, one row each)
  int threads = 2, warmup = 3, steps = 0, rounds = 4;  // steps: per round per side; 0: the model's default
  bool profile_ops = false;  // print ctgrad's time by op over the timed steps (stderr)
  bool run_time = false;     // also the same model frozen at run time (Program<run_time>), rounds alternating with the compile-time one
};

int train_bench(const std::string& model, const TrainBenchOptions& o);
// The time to freeze and plan each preset's graphs at run time (once per run of the command).
int plan_bench(int reps);
