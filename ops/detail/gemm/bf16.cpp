#include <ctgrad/ops/detail/gemm/bf16.hpp>

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctgrad/ops/detail/gemm.hpp>
#include <ctgrad/ops/detail/gemm/blocks.hpp>
#include <ctgrad/ops/detail/gemm/onednn.hpp>
#include <ctgrad/ops/detail/gemm/routes.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

namespace ctgrad::kernel {
namespace {
using namespace gemm_impl;

// Grow-only per-thread scratch (bf16 operand copies), one per nesting depth of a thread: a task
// this thread steals while it waits inside a GEMM may run a GEMM of its own. (bf16 steps allocate
// inside oneDNN anyway; fp32 GEMMs use none of it.)
struct Scratch {
  std::vector<std::uint16_t> a, b;
};
thread_local std::vector<std::unique_ptr<Scratch>> t_scratch;
thread_local std::size_t t_depth = 0;

// The calling thread's scratch for one GEMM, at its current depth, held until the GEMM returns.
class ScratchLease {
 public:
  ScratchLease() {
    if (t_scratch.size() <= t_depth) t_scratch.push_back(std::make_unique<Scratch>());
    s_ = t_scratch[t_depth++].get();
  }
  ~ScratchLease() { --t_depth; }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  Scratch& operator*() const { return *s_; }
  Scratch* operator->() const { return s_; }

 private:
  Scratch* s_;
};

// fp32 -> bf16, round to nearest even (AVX512-BF16's vcvtneps2bf16): rows of a strided matrix
// into a dense one. Only called when the CPU has AVX512-BF16 (set_gemm_precision checks).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void to_bf16(const float* src, std::int64_t rows, std::int64_t cols,
                                                                               std::int64_t ld, std::uint16_t* dst) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * ld;
    std::uint16_t* d = dst + r * cols;
    std::int64_t j = 0;
    for (; j + 16 <= cols; j += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + j)));
    if (j < cols) {
      const __mmask16 m = __mmask16((1u << (cols - j)) - 1);
      _mm256_mask_storeu_epi16(d + j, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s + j)));
    }
  }
}

// A matrix stored rows x cols (leading dimension ld) converted in parallel into a bf16 copy cut
// into rb x cb blocks (row boundaries i * rows / rb, column boundaries j * cols / cb), each block
// dense, as a primitive needs: block (i, j) starts at r0 * cols + (r1 - r0) * c0 and has rows of
// c1 - c0. With one block this is the plain dense copy.
void convert_blocks(const float* src, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t rb, std::int64_t cb,
                    std::vector<std::uint16_t>& dst) {
  if (dst.size() < std::size_t(rows * cols)) dst.resize(std::size_t(rows * cols));
  std::uint16_t* d = dst.data();
  parallel(rows, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, cols)), [&](std::int64_t r0, std::int64_t r1) {
    std::int64_t i = 0;
    while ((i + 1) * rows / rb <= r0) ++i;  // the row block holding r0
    for (std::int64_t r = r0; r < r1; ++i) {
      const std::int64_t b0 = i * rows / rb, b1 = (i + 1) * rows / rb, end = std::min(r1, b1);
      for (std::int64_t j = 0; j < cb; ++j) {
        const std::int64_t c0 = j * cols / cb, c1 = (j + 1) * cols / cb;
        to_bf16(src + r * ld + c0, end - r, c1 - c0, ld, d + b0 * cols + (b1 - b0) * c0 + (r - b0) * (c1 - c0));
      }
      r = end;
    }
  });
}

// The bf16 copies a Bf16OperandReuse scope keeps on its thread: a few operands, each with what it
// was converted from (memory, shape, leading dimension, block layout). Grow-only, per nesting depth.
struct ReusedCopy {
  const float* src = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0, rb = 0, cb = 0;
  std::vector<std::uint16_t> data;
};
struct ReuseScope {
  std::array<ReusedCopy, 4> copies;
  std::size_t used = 0;
  std::size_t gemm_depth = 0;  // the scratch depth of the scope's own GEMMs (not of ones its thread steals)
};
thread_local std::vector<std::unique_ptr<ReuseScope>> t_reuse_pool;
thread_local std::size_t t_reuse_depth = 0;
thread_local ReuseScope* t_reuse = nullptr;
std::atomic<std::int64_t> g_conversions{0};

// The bf16 copy of a stored rows x cols operand in the split's block layout: the scope's copy of
// the same operand if it has one, else converted (into the scope when it has room, else `scratch`).
const std::uint16_t* bf16_operand(const float* src, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t rb,
                                  std::int64_t cb, ReuseScope* scope, std::vector<std::uint16_t>& scratch) {
  std::vector<std::uint16_t>* dst = &scratch;
  if (scope) {
    for (std::size_t i = 0; i < scope->used; ++i) {
      const ReusedCopy& c = scope->copies[i];
      if (c.src == src && c.rows == rows && c.cols == cols && c.ld == ld && c.rb == rb && c.cb == cb) return c.data.data();
    }
    if (scope->used < scope->copies.size()) {
      ReusedCopy& c = scope->copies[scope->used++];
      c.src = src, c.rows = rows, c.cols = cols, c.ld = ld, c.rb = rb, c.cb = cb;
      dst = &c.data;
    }
  }
  g_conversions.fetch_add(1, std::memory_order_relaxed);
  convert_blocks(src, rows, cols, ld, rb, cb, *dst);
  return dst->data();
}

}  // namespace

namespace gemm_impl {

void gemm_bf16(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda, const float* B,
               std::int64_t ldb, const float* bias, float* C, std::int64_t ldc, bool acc) {
  ReuseScope* scope = t_reuse && t_reuse->gemm_depth == t_depth ? t_reuse : nullptr;
  ScratchLease scratch;
  const Split split = choose_split(M, N, K);
  // bf16 copies in the stored layout (op(A) is M x K, stored K x M when transposed), each block dense.
  const std::uint16_t* a =
      bf16_operand(A, ta ? K : M, ta ? M : K, lda, ta ? split.bk : split.bm, ta ? split.bm : split.bk, scope, scratch->a);
  const std::uint16_t* b =
      bf16_operand(B, tb ? N : K, tb ? K : N, ldb, tb ? split.bn : split.bk, tb ? split.bk : split.bn, scope, scratch->b);
  const OneDnn& dnnl = onednn();
  const bool need_amx = bf16_route() == int(Bf16Kernel::automatic);
  split_blocks(split, M, N, K, C, ldc, acc,
               [&](std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1, std::int64_t k0, std::int64_t k1, float* c,
                   std::int64_t ldc_block, bool acc_block) {
                 const std::int64_t m = m1 - m0, n = n1 - n0, k = k1 - k0;
                 const std::uint16_t* ap = ta ? a + k0 * M + k * m0 : a + m0 * K + m * k0;  // as convert_blocks placed them
                 const std::uint16_t* bp = tb ? b + n0 * K + n * k0 : b + k0 * N + k * n0;
                 const float* block_bias = bias && k0 == 0 ? bias + n0 : nullptr;  // once: not into K blocks' partials
                 if (ldc_block == n && bf16_primitive_for(ta, tb, k) &&  // a primitive writes a dense C only
                     run_block_primitive(dnnl, {m, n, k, ta, tb, acc_block, block_bias != nullptr}, need_amx ? "amx" : nullptr, ap, bp,
                                         block_bias, c))
                   return;
                 acc_block = bias_rows_first(block_bias, c, ldc_block, m, n, acc_block);
                 OneOmpThread one(dnnl);
                 const int status = dnnl.gemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, ap, ta ? m : k, bp, tb ? k : n,
                                              acc_block ? 1.0f : 0.0f, c, ldc_block);
                 if (status != 0)  // dnnl_status_t: 0 is success
                   throw std::runtime_error("matmul: oneDNN's bf16 GEMM failed with status " + std::to_string(status) + " on " +
                                            std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
               });
}

}  // namespace gemm_impl

Bf16OperandReuse::Bf16OperandReuse() : previous_(t_reuse), active_(gemm_impl::bf16_enabled()) {
  // fp32: nothing to keep, and nothing allocated (the pool grows with the nesting depth, which
  // stolen tasks make depend on scheduling: an fp32 step must not allocate).
  if (!active_) return;
  if (t_reuse_pool.size() <= t_reuse_depth) t_reuse_pool.push_back(std::make_unique<ReuseScope>());
  ReuseScope* scope = t_reuse_pool[t_reuse_depth++].get();
  scope->used = 0;
  scope->gemm_depth = t_depth;
  t_reuse = scope;
}

Bf16OperandReuse::~Bf16OperandReuse() {
  if (!active_) return;
  --t_reuse_depth;
  t_reuse = static_cast<ReuseScope*>(previous_);
}

std::int64_t bf16_conversions() { return g_conversions.load(); }

}  // namespace ctgrad::kernel
