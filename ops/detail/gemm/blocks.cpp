#include <ctgrad/ops/detail/gemm/blocks.hpp>

#include <oneapi/tbb/info.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <ctgrad/ops/detail/env_text.hpp>
#include <ctgrad/ops/detail/gemm.hpp>

namespace ctgrad::kernel {
namespace {
std::atomic<int> g_max_blocks{0};  // 0: not chosen yet
}  // namespace

namespace gemm_impl {

Split choose_split(std::int64_t M, std::int64_t N, std::int64_t K) {
  constexpr std::int64_t kMinWork = std::int64_t(1) << 21, kMinBlock = 256;
  const std::int64_t max_blocks = gemm_max_blocks();
  Split s;
  while (s.bm * s.bn * 2 <= max_blocks && 2 * M * N * K / (s.bm * s.bn * 2) >= kMinWork) {
    const bool m_can = M / (s.bm * 2) >= kMinBlock, n_can = N / (s.bn * 2) >= kMinBlock;
    if (m_can && (!n_can || M / s.bm >= N / s.bn)) s.bm *= 2;
    else if (n_can) s.bn *= 2;
    else break;
  }
  // Not inside a parallel chunk (attention's per-head GEMMs): the outer loop already uses every
  // CPU, and each of its GEMMs would hold a partial-sum buffer at once, more than the pool keeps.
  const bool may_split_k = !inside_parallel_chunk();
  while (may_split_k && s.bm * s.bn * s.bk * 2 <= max_blocks && 2 * M * N * K / (s.bm * s.bn * s.bk * 2) >= kMinWork &&
         K / (s.bk * 2) >= kMinBlock)
    s.bk *= 2;
  return s;
}

}  // namespace gemm_impl

int gemm_max_blocks() {
  int n = g_max_blocks.load(std::memory_order_relaxed);
  if (n > 0) return n;
  n = 1;  // the CPUs this process may run on, rounded up to a power of two
  while (n < tbb::info::default_concurrency()) n *= 2;
  if (const char* e = std::getenv("CTGRAD_GEMM_BLOCKS")) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(e, &end, 10);  // a bad or out-of-range value is ignored, with a warning
    if (*e && *end == '\0' && errno == 0 && v > 0 && v <= (1 << 16)) n = int(v);
    else std::fprintf(stderr, "ctgrad: warning: ignoring CTGRAD_GEMM_BLOCKS=%s (an integer in [1, 65536])\n", env_shown(e).c_str());
  }
  int expected = 0;
  g_max_blocks.compare_exchange_strong(expected, n);
  return g_max_blocks.load();
}

void set_gemm_max_blocks(int n) { g_max_blocks = std::max(1, n); }

}  // namespace ctgrad::kernel
