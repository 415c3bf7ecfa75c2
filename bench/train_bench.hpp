#pragma once
#include <string>

struct TrainBenchOptions {
  std::string config = "small", peer;  // peer: "" or "libtorch"
  int threads = 2, warmup = 3, steps = 0, rounds = 4;  // steps: per round per side; 0: the model's default
};

int train_bench(const std::string& model, const TrainBenchOptions& o);
