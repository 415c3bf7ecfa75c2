// ctgrad-bench decode: the cost of one generated token at each position of the context, with the
// key/value cache (GptGenerator's decoder graph, one step of Seq 1) and without it (the whole
// prefix re-run through the training graph, as a generator without a cache does). JSON lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <ctgrad/base/random.hpp>
#include <ctgrad/models/gpt.hpp>

using namespace ctgrad;

namespace {

template <models::GptConfig C>
struct Graphs {
  static constexpr auto train = freeze<models::gpt, C>();
};

template <models::GptConfig C>
void run(const char* name, int threads, int reps) {
  Program<Graphs<C>::train> full(Options{.threads = threads, .seed = 1});
  models::GptGenerator<C> gen(full.parameters(), Options{.threads = threads});
  std::vector<std::int32_t> prompt{1};
  // With the cache: time each step of one generation of the whole context (best of reps).
  std::vector<double> cached(std::size_t(C.context), 1e30), rerun(std::size_t(C.context), 1e30);
  for (int r = 0; r < reps; ++r) {
    std::vector<std::int32_t> tokens = prompt;
    auto last = std::chrono::steady_clock::now();
    gen.generate(tokens, C.vocab, models::SamplingOptions{.seed = std::uint64_t(r), .max_tokens = C.context - 1}, [&](std::int32_t) {
      const auto now = std::chrono::steady_clock::now();
      auto& slot = cached[tokens.size() - 1];  // the step that read tokens.size() - 1 tokens
      slot = std::min(slot, std::chrono::duration<double>(now - last).count());
      last = now;
    });
    // Without: the forward pass over the prefix of each length.
    for (std::int64_t n = 1; n < C.context; ++n) {
      std::span<const std::int32_t> ids(tokens.data(), std::size_t(n));
      const auto t0 = std::chrono::steady_clock::now();
      full.set_input(models::gpt_inputs::ids, ids, {1, n});
      full.set_input(models::gpt_inputs::targets, ids, {1, n});
      full.forward(Mode::infer);
      rerun[std::size_t(n)] = std::min(rerun[std::size_t(n)], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  double sum_cached = 0, sum_rerun = 0;
  for (std::int64_t n = 1; n < C.context; ++n) sum_cached += cached[std::size_t(n)], sum_rerun += rerun[std::size_t(n)];
  for (std::int64_t n : {std::int64_t(1), std::int64_t(C.context / 4), std::int64_t(C.context / 2), std::int64_t(C.context - 1)})
    std::printf("{\"bench\":\"decode\",\"config\":\"%s\",\"position\":%lld,\"cached_ms\":%.3f,\"rerun_ms\":%.3f,\"ratio\":%.1f}\n", name,
                (long long)n, 1e3 * cached[std::size_t(n)], 1e3 * rerun[std::size_t(n)], rerun[std::size_t(n)] / cached[std::size_t(n)]);
  std::printf("{\"bench\":\"decode\",\"config\":\"%s\",\"context\":%d,\"cached_tokens_per_s\":%.0f,\"rerun_tokens_per_s\":%.0f,\"ratio\":%.1f}\n",
              name, C.context, double(C.context - 1) / sum_cached, double(C.context - 1) / sum_rerun, sum_rerun / sum_cached);
}

}  // namespace

int decode_bench(int threads, int reps) {
  run<models::kGptSmall>("small", threads, reps);
  run<models::kGptMedium>("medium", threads, reps);
  return 0;
}
