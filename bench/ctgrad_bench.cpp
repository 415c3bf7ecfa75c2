// ctgrad-bench: benchmarks that print one JSON object per line. Ratios are measured side by side
// in one run, since the machines are shared and their speed swings.
//
//   ctgrad-bench simd [--reps N]
//     elementwise and row kernels under each instruction set the CPU has (scalar, SSE2, AVX2,
//     AVX-512), one thread, fp32, with the speedup over plain scalar loops.
//   ctgrad-bench gemm [--threads N] [--reps N]
//     ctgrad's matmul GEMM against OpenBLAS (its pthread and OpenMP builds) and oneDNN, each
//     loaded into its own symbol scope, on 1024^3 and the forms a 4096-token x 768 -> 3072
//     linear layer uses: forward NT, backward NN (dX) and TN (dW).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "train_bench.hpp"

#include <ctgrad/base/random.hpp>
#include <ctgrad/ops/detail/cpu.hpp>
#include <ctgrad/ops/detail/gemm.hpp>
#include <ctgrad/ops/detail/simd.hpp>
#include <oneapi/tbb/task_arena.h>

namespace {

using bench::now;

using sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using dnnl_fn = int (*)(char, char, long, long, long, float, const float*, long, const float*, long, float, float*, long);

struct Impl {
  std::string name;
  bool reference;
  std::function<void(bool, bool, int, int, int, const float*, int, const float*, int, float*, int)> run;
};

void* open_isolated(const std::string& path) { return dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND); }

// OpenBLAS through ctgrad's loader, which keeps it to kernels this CPU runs; null with a note.
void* open_openblas(const std::string& path, int threads) {
  std::string why;
  void* h = ctgrad::kernel::load_openblas(path, threads, why);
  if (!h) std::printf("{\"bench\":\"gemm\",\"note\":\"%s, skipped\"}\n", why.c_str());
  return h;
}

// ctgrad itself loads OpenBLAS's pthread build (one thread per call); a reference run of the same
// build with its own threads needs its own instance, so it is loaded from a private copy.
void* open_private_copy(const std::string& path, int threads) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/ctgrad-bench-XXXXXX";
  if (!mkdtemp(dir.data())) return nullptr;
  const std::string copy = dir + "/libopenblas-reference.so.0";
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) return nullptr;
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  void* h = open_openblas(copy, threads);
  std::remove(copy.c_str());  // the mapping stays valid
  rmdir(dir.c_str());

  return h;
}

struct Shape {
  int M, N, K;
  bool ta, tb;
  const char* use;
};

// bf16: ctgrad's matmul at precision=bf16 (its operands' conversion from fp32 included) against
// oneDNN's bf16 GEMM on operands already in bf16, both on `threads` threads.
int bf16_gemm_rows(int threads, int reps, const Shape* shapes, std::size_t n, tbb::task_arena& arena) {
  using bf16_fn = int (*)(char, char, long, long, long, float, const std::uint16_t*, long, const std::uint16_t*, long, float, float*, long);
  const std::string why = ctgrad::kernel::set_gemm_precision(ctgrad::kernel::Precision::bf16);
  ctgrad::kernel::set_gemm_precision(ctgrad::kernel::Precision::fp32);
  void* h = why.empty() ? open_isolated("libdnnl.so.2") : nullptr;
  auto dnnl = h ? reinterpret_cast<bf16_fn>(dlsym(h, "dnnl_gemm_bf16bf16f32")) : nullptr;
  auto omp_threads = h ? reinterpret_cast<void (*)(int)>(dlsym(h, "omp_set_num_threads")) : nullptr;
  if (!dnnl) {
    std::printf("{\"bench\":\"gemm_bf16\",\"note\":\"%s, skipped\"}\n", why.empty() ? "no dnnl_gemm_bf16bf16f32" : why.c_str());
    return 0;
  }
  for (std::size_t si = 0; si < n; ++si) {
    const Shape& s = shapes[si];
    std::vector<float> A(std::size_t(s.M) * s.K), B(std::size_t(s.K) * s.N), C(std::size_t(s.M) * s.N);
    for (std::size_t i = 0; i < A.size(); ++i) A[i] = float(ctgrad::random::uniform(1, i)) - 0.5f;
    for (std::size_t i = 0; i < B.size(); ++i) B[i] = float(ctgrad::random::uniform(2, i)) - 0.5f;
    auto bf = [](float x) { std::uint32_t u; std::memcpy(&u, &x, 4); return std::uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); };
    std::vector<std::uint16_t> Ab(A.size()), Bb(B.size());
    for (std::size_t i = 0; i < A.size(); ++i) Ab[i] = bf(A[i]);
    for (std::size_t i = 0; i < B.size(); ++i) Bb[i] = bf(B[i]);
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    const double flops = 2.0 * s.M * s.N * s.K;
    double mine = 0, ref = 0;
    for (int round = 0; round < reps; ++round) {
      ctgrad::kernel::set_gemm_precision(ctgrad::kernel::Precision::bf16);
      for (int r = 0; r < 4; ++r) {
        const double t = now();
        arena.execute([&] { ctgrad::kernel::gemm(s.ta, s.tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), s.N, false); });
        if (r > 0) mine = std::max(mine, flops / (now() - t) / 1e9);
      }
      ctgrad::kernel::set_gemm_precision(ctgrad::kernel::Precision::fp32);
      usleep(20000);
      if (omp_threads) omp_threads(threads);  // oneDNN's own threads for the reference
      for (int r = 0; r < 4; ++r) {
        const double t = now();
        dnnl(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.M, s.N, s.K, 1.f, Ab.data(), lda, Bb.data(), ldb, 0.f, C.data(), s.N);
        if (r > 0) ref = std::max(ref, flops / (now() - t) / 1e9);
      }
      usleep(20000);
    }
    char shape[64];
    std::snprintf(shape, sizeof shape, "%dx%dx%d %c%c", s.M, s.N, s.K, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N');
    for (int side = 0; side < 2; ++side)
      std::printf("{\"bench\":\"gemm_bf16\",\"shape\":\"%s\",\"use\":\"%s\",\"impl\":\"%s\",\"threads\":%d,\"gflops\":%.1f,"
                  "\"ratio_to_ref\":%.3f}\n",
                  shape, s.use, side ? "onednn-bf16 (operands already bf16)" : "ctgrad precision=bf16", threads, side ? ref : mine,
                  side ? 1.0 : mine / ref);
    std::fflush(stdout);
  }
  return 0;
}

int gemm_bench(int threads, int reps) {
  // References use OpenMP or pthreads with `threads` threads; ctgrad uses a oneTBB arena of the same size.
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  std::vector<Impl> impls;
  tbb::task_arena arena(threads);
  const std::string backend = ctgrad::kernel::gemm_backend();  // loads ctgrad's BLAS first
  impls.push_back({"ctgrad", false,
                   [&](bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
                       int ldc) { arena.execute([&] { ctgrad::kernel::gemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, false); }); }});
  const std::string dir = "/usr/lib/x86_64-linux-gnu/";
  for (const char* variant : {"openblas-pthread", "openblas-openmp"}) {
    const std::string path = dir + variant + "/libopenblas.so.0";
    if (!std::ifstream(path)) {
      std::printf("{\"bench\":\"gemm\",\"note\":\"%s not installed, skipped\"}\n", variant);
      continue;
    }
    void* h = std::string(variant) == "openblas-pthread" ? open_private_copy(path, threads) : open_openblas(path, threads);
    if (!h) continue;
    auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"));
    if (set_threads) set_threads(threads);
    auto sgemm = reinterpret_cast<sgemm_fn>(dlsym(h, "cblas_sgemm"));
    impls.push_back({variant, true,
                     [sgemm](bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                             float* C, int ldc) { sgemm(101, ta ? 112 : 111, tb ? 112 : 111, M, N, K, 1.f, A, lda, B, ldb, 0.f, C, ldc); }});
  }
  if (void* h = open_isolated("libdnnl.so.2")) {
    auto sgemm = reinterpret_cast<dnnl_fn>(dlsym(h, "dnnl_sgemm"));
    impls.push_back({"onednn", true,
                     [sgemm](bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                             float* C, int ldc) { sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.f, A, lda, B, ldb, 0.f, C, ldc); }});
  } else {
    std::printf("{\"bench\":\"gemm\",\"note\":\"oneDNN (libdnnl-dev) not installed, skipped\"}\n");
  }
  std::printf("{\"bench\":\"machine\",\"cpu\":\"%s\",\"cores\":%u,\"threads\":%d,\"ctgrad_backend\":\"%s\",\"ctgrad_bf16\":\"%s\"}\n",
              ctgrad::cpu::describe().c_str(), std::thread::hardware_concurrency(), threads, backend.c_str(),
              ctgrad::kernel::bf16_kernel().c_str());

  const Shape shapes[] = {{1024, 1024, 1024, false, false, "square"},
                          {4096, 3072, 768, false, true, "linear forward: X W^T"},
                          {4096, 768, 3072, false, false, "linear backward: dX = dY W"},
                          {3072, 768, 4096, true, false, "linear backward: dW = dY^T X"}};
  for (const Shape& s : shapes) {
    std::vector<float> A(std::size_t(s.M) * s.K), B(std::size_t(s.K) * s.N), C(std::size_t(s.M) * s.N);
    for (std::size_t i = 0; i < A.size(); ++i) A[i] = float(ctgrad::random::uniform(1, i)) - 0.5f;
    for (std::size_t i = 0; i < B.size(); ++i) B[i] = float(ctgrad::random::uniform(2, i)) - 0.5f;
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    const double flops = 2.0 * s.M * s.N * s.K;
    std::vector<double> best(impls.size(), 0);
    // Rounds over all implementations, so a slow spell of the host hits them alike.
    for (int round = 0; round < reps; ++round)
      for (std::size_t i = 0; i < impls.size(); ++i) {
        impls[i].run(s.ta, s.tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), s.N);  // warm
        for (int r = 0; r < 3; ++r) {
          const double t = now();
          impls[i].run(s.ta, s.tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), s.N);
          best[i] = std::max(best[i], flops / (now() - t) / 1e9);
        }
        usleep(20000);  // let spinning worker pools of the previous library go to sleep
      }
    double best_ref = 0;
    for (std::size_t i = 0; i < impls.size(); ++i)
      if (impls[i].reference) best_ref = std::max(best_ref, best[i]);
    char shape[64];
    std::snprintf(shape, sizeof shape, "%dx%dx%d %c%c", s.M, s.N, s.K, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N');
    for (std::size_t i = 0; i < impls.size(); ++i)
      std::printf("{\"bench\":\"gemm\",\"shape\":\"%s\",\"use\":\"%s\",\"impl\":\"%s\",\"threads\":%d,\"gflops\":%.1f,"
                  "\"ratio_to_best_ref\":%.3f}\n",
                  shape, s.use, impls[i].name.c_str(), threads, best[i], best_ref > 0 ? best[i] / best_ref : 0.0);
    std::fflush(stdout);
  }
  return bf16_gemm_rows(threads, reps, shapes, std::size(shapes), arena);
}

// Elementwise and row kernels under each instruction set this CPU has, one thread, fp32.
int simd_bench(int reps) {
  const std::int64_t n = 1 << 20, row = 768;
  std::vector<float> x(n), y(n), g(n, 1.0f);
  for (std::int64_t i = 0; i < n; ++i) x[std::size_t(i)] = float(ctgrad::random::normal(3, std::uint64_t(i)));
  struct Kernel {
    const char* name;
    std::function<void(const ctgrad::simd::Table&)> run;
  };
  const Kernel kernels[] = {
      {"exp", [&](const ctgrad::simd::Table& t) { t.unary[ctgrad::simd::exp][0](x.data(), y.data(), n, 0); }},
      {"gelu", [&](const ctgrad::simd::Table& t) { t.unary[ctgrad::simd::gelu][0](x.data(), y.data(), n, 0); }},
      {"gelu_vjp", [&](const ctgrad::simd::Table& t) { t.unary_vjp[ctgrad::simd::gelu][0](x.data(), nullptr, g.data(), y.data(), n, 0, false); }},
      {"gelu_tanh", [&](const ctgrad::simd::Table& t) { t.unary[ctgrad::simd::gelu_tanh][0](x.data(), y.data(), n, 0); }},
      {"gelu_tanh_vjp", [&](const ctgrad::simd::Table& t) { t.unary_vjp[ctgrad::simd::gelu_tanh][0](x.data(), nullptr, g.data(), y.data(), n, 0, false); }},
      {"add", [&](const ctgrad::simd::Table& t) { t.binary[ctgrad::simd::add][0](x.data(), g.data(), y.data(), n); }},
      {"softmax_rows_768", [&](const ctgrad::simd::Table& t) {
         for (std::int64_t r = 0; r + row <= n; r += row) t.softmax_row[0](x.data() + r, y.data() + r, row, false, nullptr);
       }},
      {"layer_norm_rows_768", [&](const ctgrad::simd::Table& t) {
         for (std::int64_t r = 0; r + row <= n; r += row) {
           const double mean = t.row_sum[0](x.data() + r, row) / row;
           const double inv = 1 / std::sqrt(t.row_sq_dev[0](x.data() + r, row, mean) / row + 1e-5);
           t.norm_row[0](x.data() + r, y.data() + r, row, mean, inv, g.data(), nullptr);
         }
       }},
  };
  for (const Kernel& k : kernels) {
    double scalar_rate = 0;
    for (const std::string& isa : ctgrad::simd::available()) {
      const ctgrad::simd::Table& t = *ctgrad::simd::table(isa);
      double best = 0;
      for (int r = 0; r < reps * 3; ++r) {
        const double t0 = now();
        k.run(t);
        best = std::max(best, double(n) / (now() - t0) / 1e9);
      }
      if (isa == "scalar") scalar_rate = best;
      std::printf("{\"bench\":\"simd\",\"kernel\":\"%s\",\"isa\":\"%s\",\"gelem_per_s\":%.3f,\"speedup_vs_scalar\":%.2f%s}\n",
                  k.name, isa.c_str(), best, scalar_rate > 0 ? best / scalar_rate : 1.0,
                  &t == &ctgrad::simd::best() ? ",\"default\":true" : "");
    }
  }
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: ctgrad-bench gemm|simd|decode [--threads N] [--reps N]\n"
               "       ctgrad-bench gpt|vit|transformer|llama|seq2seq [--config small|medium|mha|mqa|moe|dense2|recompute] [--peer libtorch] [--threads N]\n"
               "                    [--warmup N] [--steps N] [--rounds N] [--precision fp32|bf16|both]\n"
               "                    [--profile-ops]   (ctgrad's time by op over the timed steps, on stderr)\n"
               "                    [--run-time]      (also the model frozen at run time, Program<run_time>, rounds alternating)\n"
               "       ctgrad-bench plan [--reps N]   (each preset's graphs frozen and planned at run time, as the command does once per run)\n");
  return 2;
}

}  // namespace

int decode_bench(int threads, int reps);  // decode_bench.cpp

// Timed steps per round and side (4 rounds by default): about 1-5 s of ctgrad on 2 cores.
int default_steps(const std::string& model, const std::string& config) {
  if (model == "gpt" || model == "llama") return config == "medium" ? 3 : 30;
  if (model == "vit") return 8;
  return config == "medium" ? 3 : 12;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  int threads = int(std::thread::hardware_concurrency()), reps = 3;
  TrainBenchOptions train;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--config" && i + 1 < argc) train.config = argv[++i];
    else if (a == "--peer" && i + 1 < argc) train.peer = argv[++i];
    else if (a == "--precision" && i + 1 < argc) train.precision = argv[++i];
    else if (a == "--warmup" && i + 1 < argc) train.warmup = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) train.steps = std::atoi(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) train.rounds = std::atoi(argv[++i]);
    else if (a == "--profile-ops") train.profile_ops = true;
    else if (a == "--run-time") train.run_time = true;
    else {
      std::fprintf(stderr, "ctgrad-bench: unknown option '%s'\n", a.c_str());
      return usage();
    }
  }
  if (threads < 1 || reps < 1) return usage();
  if (train.precision != "fp32" && train.precision != "bf16" && train.precision != "both") return usage();
  if (cmd == "gemm") return gemm_bench(threads, reps);
  if (cmd == "simd") return simd_bench(reps);
  if (cmd == "decode") return decode_bench(threads, reps);
  if (cmd == "plan") return plan_bench(reps);
  if (cmd == "gpt" || cmd == "vit" || cmd == "transformer" || cmd == "llama" || cmd == "seq2seq") {
    if (!train.peer.empty() && train.peer != "libtorch") {
      std::fprintf(stderr, "ctgrad-bench: unknown peer '%s' (peers: libtorch)\n", train.peer.c_str());
      return 2;
    }
    if (train.warmup < 0 || train.steps < 0 || train.rounds < 1) return usage();
    train.threads = threads;
    if (train.steps == 0) train.steps = default_steps(cmd, train.config);
    std::signal(SIGPIPE, SIG_IGN);  // a peer that dies is reported, not a silent exit 141
    try {
      return train_bench(cmd, train);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ctgrad-bench %s: %s\n", cmd.c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "ctgrad-bench: unknown benchmark '%s'\n", cmd.c_str());
  return usage();
}
