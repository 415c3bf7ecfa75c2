// Shared by ctgrad-bench and its libtorch peer: timing, peak RSS, heap-allocation count, the
// measured fp32 FMA peak, and the model shapes both sides train (so they cannot drift apart).
#pragma once
#include <immintrin.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace bench {

long long heap_allocations();  // alloc_counter.cpp: malloc-family calls so far, whole process, but
// those made while set_library_call(f)'s f returns true (inside oneDNN), counted apart:
long long library_allocations();
void set_library_call(bool (*inside)());

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Peak resident set of this process image: VmHWM. (Not getrusage's ru_maxrss, which a child
// started by posix_spawn inherits from its parent's high-water mark at exec.)
inline double peak_rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

// The shapes of the training benchmarks. Dropout is 0 on both sides: the benchmark times the
// arithmetic every variant shares, and the two sides then run the same computation.
struct Shape {
  std::string model, config;
  int batch = 0, seq = 0;                      // GPT: context; ViT: tokens incl. <cls>; Transformer: src = tgt length
  int vocab = 0, n_layer = 0, heads = 0, d_model = 0, d_ff = 0;
  int image = 0, patch = 0, classes = 0;       // ViT
  double label_smoothing = 0;                  // Transformer
  int kv_heads = 0, experts = 0, top_k = 0;    // Llama: key/value heads; a mixture of experts (0: dense)
  double capacity = 0;                         // the experts' capacity factor
};

inline bool shape_of(const std::string& model, const std::string& config, Shape& s) {
  s = Shape{};
  s.model = model;
  s.config = config;
  if (model == "gpt" && config == "small") {
    s.vocab = 256, s.n_layer = 4, s.heads = 4, s.d_model = 128, s.seq = 64, s.batch = 12;
  } else if (model == "gpt" && config == "medium") {
    s.vocab = 8192, s.n_layer = 6, s.heads = 8, s.d_model = 512, s.seq = 256, s.batch = 8;
  } else if (model == "vit" && config == "small") {
    s.image = 28, s.patch = 4, s.d_model = 128, s.n_layer = 4, s.heads = 4, s.d_ff = 256, s.classes = 10, s.batch = 128;
    s.seq = (28 / 4) * (28 / 4) + 1;
  } else if (model == "transformer" && config == "small") {
    s.vocab = 8000, s.n_layer = 3, s.d_model = 256, s.heads = 4, s.d_ff = 1024, s.batch = 32, s.seq = 32, s.label_smoothing = 0.1;
  } else if (model == "transformer" && config == "medium") {
    s.vocab = 8000, s.n_layer = 6, s.d_model = 512, s.heads = 8, s.d_ff = 2048, s.batch = 16, s.seq = 64, s.label_smoothing = 0.1;
  } else if (model == "seq2seq" && (config == "small" || config == "recompute")) {
    // Bahdanau's encoder-decoder (models/seq2seq.hpp), d2l's sizes: embedding 256 (d_ff here),
    // GRUs of 256, 2 layers; recompute: the same model keeping only its states between forward and backward.
    s.vocab = 8000, s.n_layer = 2, s.d_model = 256, s.d_ff = 256, s.batch = 32, s.seq = 32;
  } else if (model == "llama" && (config == "small" || config == "mha" || config == "mqa" || config == "moe" || config == "dense2")) {
    // The Llama small preset (models/llama.hpp) and its variants: full multi-head and multi-query
    // attention; 4 SwiGLU experts of the preset's width, top-2, capacity 1.25; the dense MLP of
    // the MoE's active width (twice the preset's).
    s.vocab = 256, s.n_layer = 4, s.heads = 4, s.d_model = 128, s.seq = 64, s.batch = 12, s.d_ff = 344;
    s.kv_heads = config == "mha" ? 4 : config == "mqa" ? 1 : 2;
    if (config == "moe") s.experts = 4, s.top_k = 2, s.capacity = 1.25;
    if (config == "dense2") s.d_ff = 2 * 344;
  } else {
    return false;
  }
  if (s.model == "gpt") s.d_ff = 4 * s.d_model;
  return true;
}

// Deterministic synthetic batches (a hash of the position, no RNG state), the same on both sides.
struct Batch {
  std::vector<std::int32_t> ids, targets, tgt_in, labels, lengths;
  std::vector<float> images;
};
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
struct Batches {
  std::vector<Batch> batches;
  Batches(const Shape& s, int n) {
    for (int k = 0; k < n; ++k) {
      Batch b;
      const std::size_t tokens = std::size_t(s.batch) * std::size_t(s.seq);
      auto token = [&](std::uint64_t salt, std::size_t i) { return std::int32_t(1 + mix(salt * 1000003 + k * 7919 + i) % (s.vocab - 1)); };
      if (s.model == "vit") {
        b.images.resize(std::size_t(s.batch) * s.image * s.image);
        for (std::size_t i = 0; i < b.images.size(); ++i) b.images[i] = float(mix(k * 1000003 + i) % 1000) / 1000.0f;
        for (int i = 0; i < s.batch; ++i) b.labels.push_back(std::int32_t(mix(k * 31 + i + 17) % s.classes));
      } else {
        for (std::size_t i = 0; i < tokens; ++i) {
          b.ids.push_back(token(1, i));
          b.targets.push_back(token(2, i));
          b.tgt_in.push_back(token(3, i));
        }
        b.lengths.assign(std::size_t(s.batch), s.seq);
      }
      batches.push_back(std::move(b));
    }
  }
  const Batch& at(int step) const { return batches[std::size_t(step) % batches.size()]; }
};

// Model FLOPs of one training step (forward + backward = 3x the forward's multiply-adds x 2):
// 6 x (weights each token passes through) x tokens, plus attention's QK^T and PV, 12 x L x T x d
// per token for each attention (full, as PaLM counts it, also where a causal mask halves it).
inline double flops_per_step(const Shape& s) {
  const double d = s.d_model, f = s.d_ff, L = s.n_layer, B = s.batch, T = s.seq;
  const double block = 4 * d * d + 2 * d * f;  // QKV + output projection, two FFN matrices
  if (s.model == "gpt") return 6 * B * T * (L * block + d * s.vocab) + 12 * L * B * T * T * d;
  if (s.model == "llama") {  // q, o; k, v of kv_heads; SwiGLU's three matrices, top_k of them in a MoE (the active ones)
    const double kv = d / s.heads * s.kv_heads, ffn = 3 * d * f * (s.experts ? s.top_k : 1) + d * s.experts;
    return 6 * B * T * (L * (2 * d * d + 2 * d * kv + ffn) + d * s.vocab) + 12 * L * B * T * T * d;
  }
  if (s.model == "seq2seq") {  // per token: GRU layers (3H (in + H) each), W_k, W_q, additive scores and context (3 S H), the output layer
    const double H = d, E = f, S = T;
    const double encoder = 3 * H * (E + H) + (L - 1) * 3 * H * (2 * H) + H * H;
    const double decoder = H * H + 3 * S * H + 3 * H * (E + 2 * H) + (L - 1) * 3 * H * (2 * H) + H * s.vocab;
    return 6 * B * T * (encoder + decoder);
  }
  if (s.model == "vit") {
    const double patches = T - 1, patch_in = double(s.patch) * s.patch;
    return 6 * B * (T * L * block + patches * patch_in * d + d * s.classes) + 12 * L * B * T * T * d;
  }
  // Transformer: encoder layers over the source, decoder layers (self + cross attention) over the
  // target, cross K/V projected from the source, the tied output projection over the target.
  const double enc = L * block, dec = L * (block + 2 * d * d) ;  // + cross Q and output projection
  const double cross_kv = L * 2 * d * d;
  return 6 * B * T * (enc + dec + cross_kv + d * s.vocab) + 12 * B * T * T * d * (L + 2 * L);
}

// The fp32 FMA peak of `threads` threads: independent FMA chains on registers, as wide as the CPU
// allows. GFLOP/s (2 per FMA lane).
namespace detail {
// 12 independent accumulators hide the FMA latency (4 cycles x 2 ports + margin).
#define CTGRAD_FMA_LOOP(T, set1, fmadd, store)                      \
  T acc[12];                                                        \
  for (int i = 0; i < 12; ++i) acc[i] = set1(float(i) * 1e-3f);     \
  const T a = set1(0.999f), b = set1(1e-4f);                        \
  for (long k = 0; k < iters; ++k)                                  \
    for (int i = 0; i < 12; ++i) acc[i] = fmadd(acc[i], a, b);      \
  alignas(64) float lanes[16];                                      \
  float s = 0;                                                      \
  for (int i = 0; i < 12; ++i) store(lanes, acc[i]), s += lanes[0]; \
  return s;
__attribute__((target("avx512f"))) inline double fma512(long iters) {
  CTGRAD_FMA_LOOP(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_store_ps)
}
__attribute__((target("avx2,fma"))) inline double fma256(long iters) {
  CTGRAD_FMA_LOOP(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_store_ps)
}
inline __m128 mul_add(__m128 x, __m128 a, __m128 b) { return _mm_add_ps(_mm_mul_ps(x, a), b); }
inline double fma128(long iters) {
  CTGRAD_FMA_LOOP(__m128, _mm_set1_ps, mul_add, _mm_store_ps)
}
#undef CTGRAD_FMA_LOOP
}  // namespace detail

inline double fma_peak_gflops(int threads) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const int width = __builtin_cpu_supports("avx512f") ? 16 : avx2 ? 8 : 4;
  const long iters = 20'000'000 / (width / 4);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> pool;
    std::vector<double> sink(static_cast<std::size_t>(threads), 0.0);
    const double t0 = now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        sink[std::size_t(t)] = width == 16 ? detail::fma512(iters) : width == 8 ? detail::fma256(iters) : detail::fma128(iters);
      });
    for (auto& th : pool) th.join();
    const double secs = now() - t0;
    best = std::max(best, double(threads) * iters * 12 * width * 2 / secs / 1e9);
  }
  return best;
}

struct Timing {
  double median = 0, min = 0, max = 0;
};
inline Timing summarize(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  if (t.empty()) return {};
  return {t[t.size() / 2], t.front(), t.back()};
}

}  // namespace bench
