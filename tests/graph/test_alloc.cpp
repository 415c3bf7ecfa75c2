// A steady-state forward+backward step makes no heap allocation: operator new is counted.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "../host.hpp"
#include "../models.hpp"

#include <ctgrad/ops/detail/gemm.hpp>

namespace {
std::atomic<long> g_news{0}, g_onednn_news{0};  // ctgrad's; oneDNN's own, inside its calls
std::atomic<bool> g_counting{false};
void* counted(std::size_t n, std::size_t align = 0) {
  if (g_counting.load(std::memory_order_relaxed))
    (ctgrad::kernel::inside_onednn_call() ? g_onednn_news : g_news).fetch_add(1, std::memory_order_relaxed);
  void* p = align ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace ctgrad;

static constexpr auto MLP = freeze<ctgrad::testing::mlp_classifier<64, 256, 10, 4>>();
static constexpr auto ATTN = freeze<ctgrad::testing::attention_model<32>>();
// A recurrence with a mask and dropout in its body (graph/scan.hpp).
constexpr auto scan_model = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 16});
  Value mask = g.input("mask", {Batch, Seq}, {.dtype = DType::index});
  ScanResult r = scan(g.scope("rnn"), {.init = {scan_zeros({Batch, 32})}, .xs = {x}, .mask = mask},
                      [&](const Scope& s, const ScanStep& t) -> ScanStepResult {
                        Value h = tanh(layers::linear(s.scope("cell"), concat({dropout(t.x[0], 0.1), t.state[0]}, 1), 32));
                        return {.state = {h}, .out = {h}};
                      });
  g.loss(mean(r.seq[0]) + sum(r.last[0]));
  return g;
};
static constexpr auto SCAN = freeze<scan_model>();

// Allocations in 5 steady steps: ctgrad's must be 0. oneDNN 2.6's C API allocates its argument map
// on every primitive execution (fp32 blocks take primitives on AVX-512 hosts): those are counted
// apart and must stay a few per primitive run, not grow with anything else (dnnl_sgemm's calls,
// counted with them, make none through operator new: its packing buffers come from malloc).
template <const auto& G, class Fill>
long news_per_step(Fill fill) {
  Program<G> p(Options{.threads = 2, .seed = 1});
  fill(p);
  for (int warm = 0; warm < 2; ++warm) {
    p.zero_grad();
    p.forward();
    p.backward();
  }
  g_news = 0, g_onednn_news = 0;
  const std::int64_t runs0 = kernel::fp32_primitive_runs() + kernel::fp32_call_runs();
  g_counting = true;
  for (int step = 0; step < 5; ++step) {
    fill(p);  // new data each step, same shapes
    p.zero_grad();
    p.forward();
    p.backward();
    auto v = p.parameter_values();
    auto g = p.parameter_grads();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] -= 0.01f * g[i];
  }
  g_counting = false;
  const std::int64_t runs = kernel::fp32_primitive_runs() + kernel::fp32_call_runs() - runs0;
  INFO("oneDNN: " << g_onednn_news.load() << " allocations in " << runs << " primitive runs and dnnl_sgemm calls");
  CHECK(g_onednn_news.load() <= 8 * runs);
  return g_news.load();
}

TEST_CASE("steady-state training steps allocate nothing", "[executor][alloc]") {
  std::vector<float> x(128 * 64, 0.5f), mask(8 * 16, 1.0f), xs(8 * 16 * 32, 0.25f);
  std::vector<std::int32_t> y(128, 3);
  long mlp = news_per_step<MLP>([&](auto& p) {
    p.set_input("x", std::span<const float>(x), {128, 64});
    p.set_input("y", std::span<const std::int32_t>(y), {128});
  });
  CHECK(mlp == 0);
  long attn = news_per_step<ATTN>([&](auto& p) {
    p.set_input("x", std::span<const float>(xs), {8, 16, 32});
    p.set_input("mask", std::span<const float>(mask), {8, 1, 16});
    p.set_input("target", std::span<const float>(xs), {8, 16, 32});
  });
  CHECK(attn == 0);
  std::vector<float> seq(8 * 12 * 16, 0.5f);
  std::vector<std::int32_t> seq_mask(8 * 12, 1);
  seq_mask[5] = 0;
  long scanned = news_per_step<SCAN>([&](auto& p) {
    p.set_input("x", std::span<const float>(seq), {8, 12, 16});
    p.set_input("mask", std::span<const std::int32_t>(seq_mask), {8, 12});
  });
  CHECK(scanned == 0);
  // Many rows: the weight gradients' GEMMs split K (as for every host, 4 blocks), their partial
  // products in scratch that grows while warming up only.
  std::vector<float> x_long(4096 * 64, 0.5f);
  std::vector<std::int32_t> y_long(4096, 3);
  long split_k = 0;
  {
    ctgrad::testing::ScopedGemmBlocks blocks(4);
    split_k = news_per_step<MLP>([&](auto& p) {
      p.set_input("x", std::span<const float>(x_long), {4096, 64});
      p.set_input("y", std::span<const std::int32_t>(y_long), {4096});
    });
  }
  CHECK(split_k == 0);
  // fp32 GEMMs forced through oneDNN (where it is installed), matmul primitives, then dnnl_sgemm:
  // a primitive's execution sets are made with it, so which thread runs a shape first allocates
  // nothing; dnnl_sgemm's buffers are its own.
  struct Forced {
    kernel::Fp32Kernel route;
    bool (*available)();
    std::int64_t (*runs)();
  };
  const Forced forced_routes[] = {
      {kernel::Fp32Kernel::primitive, [] { return kernel::fp32_kernel().find("matmul primitives (") != std::string::npos; },
       kernel::fp32_primitive_runs},
      {kernel::Fp32Kernel::call, [] { return kernel::fp32_kernel() == "oneDNN's dnnl_sgemm for every block"; }, kernel::fp32_call_runs}};
  for (const Forced& f : forced_routes) {
    kernel::set_fp32_kernel(f.route);
    if (!f.available()) {
      WARN("skipped: route " << int(f.route) << " is not here: " << kernel::fp32_kernel());
      continue;
    }
    const std::int64_t runs = f.runs();
    const long forced = news_per_step<MLP>([&](auto& p) {
      p.set_input("x", std::span<const float>(x_long), {4096, 64});
      p.set_input("y", std::span<const std::int32_t>(y_long), {4096});
    });
    INFO("route " << int(f.route));
    CHECK(forced == 0);
    CHECK(f.runs() > runs);
  }
  kernel::set_fp32_kernel(kernel::Fp32Kernel::automatic);
  // The counter does count: building a program allocates.
  g_news = 0;
  g_counting = true;
  { Program<MLP> p; }
  g_counting = false;
  CHECK(g_news.load() > 0);
}
