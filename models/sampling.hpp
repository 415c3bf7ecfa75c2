// Choosing the next token from logits: temperature, top-k, nucleus (top-p), greedy, reproducible
// draws from a counter-based RNG (the same seed gives the same text on any machine).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace ctgrad::models {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (argmax)
  int top_k = 0;             // keep the k most likely tokens; 0: all
  double top_p = 1.0;        // keep the smallest set whose probability reaches p; 1: all
  std::uint64_t seed = 1;
  int max_tokens = 200;      // new tokens at most
  int end_token = -1;        // stop after generating this token; -1: none
  bool slide = false;        // at the context limit: re-read the last half of the context and go on (else stop)
  int context = 0;           // the context the model was trained with (0: the model's whole table)
};

// Throws std::invalid_argument naming the option that is out of range.
void check(const SamplingOptions& o);

// Draw number `draw` among the first `n_valid` logits (tokens past the tokenizer's vocabulary
// are never chosen). `work` is reused between calls. Non-finite logits are an error.
std::int32_t sample_token(std::span<const float> logits, std::int32_t n_valid, const SamplingOptions& o, std::uint64_t draw,
                          std::vector<std::pair<double, std::int32_t>>& work);

}  // namespace ctgrad::models
