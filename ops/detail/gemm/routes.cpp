#include <ctgrad/ops/detail/gemm/routes.hpp>

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <ctgrad/ops/detail/cpu.hpp>
#include <ctgrad/ops/detail/env_text.hpp>
#include <ctgrad/ops/detail/gemm.hpp>
#include <ctgrad/ops/detail/gemm/onednn.hpp>
#include <ctgrad/ops/detail/gemm/openblas.hpp>

namespace ctgrad::kernel {
namespace gemm_impl {

std::atomic<int> g_bf16_kernel{int(Bf16Kernel::automatic)};

// Automatic: primitives where oneDNN runs them on AMX tiles (asked once, of a probe shape).
bool amx_primitives() {
  static const bool amx = probe_impl(false).find("amx") != std::string::npos;
  return amx;
}

// A kernel named by an environment variable: -1 when unset or empty (automatic), else the value
// of its name; another name is ignored with a warning listing the names (`names`: "call or primitive").
int kernel_from_env(const char* var, std::initializer_list<std::pair<const char*, int>> kernels, const char* names) {
  const char* e = std::getenv(var);
  if (!e || !*e) return -1;
  for (const auto& [name, k] : kernels)
    if (std::strcmp(e, name) == 0) return k;
  std::fprintf(stderr, "ctgrad: warning: ignoring %s=%s (%s)\n", var, env_shown(e).c_str(), names);
  return -1;
}

// CTGRAD_BF16_GEMM, read once.
int bf16_kernel_from_env() {
  static const int k =
      kernel_from_env("CTGRAD_BF16_GEMM", {{"call", int(Bf16Kernel::call)}, {"primitive", int(Bf16Kernel::primitive)}}, "call or primitive");
  return k;
}

// Whether a bf16 block of this form goes through a primitive. Automatic, on AMX: the forms where
// primitives ran faster than the BLAS-like call, both alternating on the same shapes: op(B)
// transposed (a linear's forward, attention's Q K^T) and neither transposed with k < 1024 (a small
// layer's dX, attention's P V; slower at longer k); never op(A) transposed (a weight gradient).
// Figures: docs/performance.md.
int bf16_route() {
  const int route = g_bf16_kernel.load(std::memory_order_relaxed);
  return route == int(Bf16Kernel::automatic) && bf16_kernel_from_env() >= 0 ? bf16_kernel_from_env() : route;
}

bool bf16_primitive_for(bool trans_a, bool trans_b, std::int64_t k) {
  const int route = bf16_route();
  if (route == int(Bf16Kernel::call)) return false;
  if (route == int(Bf16Kernel::primitive)) return onednn().engine != nullptr;
  return amx_primitives() && !trans_a && (trans_b || k < 1024);
}

std::atomic<bool> g_bf16{false};

std::atomic<int> g_fp32_kernel{int(Fp32Kernel::automatic)};

// CTGRAD_FP32_GEMM, read once.
int fp32_kernel_from_env() {
  static const int k = kernel_from_env(
      "CTGRAD_FP32_GEMM", {{"openblas", int(Fp32Kernel::openblas)}, {"primitive", int(Fp32Kernel::primitive)}, {"call", int(Fp32Kernel::call)}},
      "openblas, primitive or call");
  return k;
}
int fp32_route() {
  const int route = g_fp32_kernel.load(std::memory_order_relaxed);
  return route == int(Fp32Kernel::automatic) && fp32_kernel_from_env() >= 0 ? fp32_kernel_from_env() : route;
}

// Automatic: primitives where oneDNN runs fp32 ones with its AVX-512 brgemm kernels (asked once,
// of a probe shape).
bool fp32_brgemm() {
  static const bool brg = probe_impl(true).find("brg:avx512") != std::string::npos;
  return brg;
}

// Whether an fp32 block of this shape goes through a primitive. Automatic, on AVX-512 brgemm
// hosts, where they ran faster than OpenBLAS, both alternating on the same shapes: op(A) not
// transposed (a linear's forward and dX); op(A) transposed (a weight gradient) only when K is long
// against C's sides, K >= 8 max(M, N) (ViT's); weight gradients of shorter K were no faster.
// Attention's per-head products read heads interleaved by stride: not dense, so not a primitive
// (fp32_block_primitive): OpenBLAS, or dnnl_sgemm for the rare one that meets its rule. Blocks
// under 16 MFLOP stay on OpenBLAS: a primitive's JIT build (once per shape) and per-call set-up are
// not repaid on a tiny model's products, and a tiny model's short run never loads oneDNN.
// Figures: docs/performance.md.
constexpr std::int64_t kFp32PrimitiveMinFlops = std::int64_t(1) << 24;
constexpr std::int64_t kFp32PrimitiveLongK = 8;  // op(A) transposed: K >= this x max(M, N)

bool fp32_primitive_for(bool trans_a, std::int64_t m, std::int64_t n, std::int64_t k) {
  const int route = fp32_route();
  if (route == int(Fp32Kernel::openblas) || route == int(Fp32Kernel::call)) return false;
  if (route == int(Fp32Kernel::primitive)) return onednn().engine != nullptr;
  const bool form = !trans_a || k >= kFp32PrimitiveLongK * std::max(m, n);
  return form && 2 * m * n * k >= kFp32PrimitiveMinFlops && fp32_brgemm();  // the probe last: it loads oneDNN
}

// Whether an fp32 block without a bias goes through oneDNN's BLAS-like dnnl_sgemm (one thread, the
// calling one). Automatic, on the hosts where primitives are taken, blocks of at least 16 MFLOP
// and C wider than 512 columns: NT ones (a tied output layer's logits); NN ones (a dX) whose B is
// large, K >= 1024 or N K >= 2^21; TN ones (a weight gradient) of at least 512 rows: the forms where
// it ran faster than the route they had, two blocks on two threads at once. Smaller B, narrower TN
// and narrower C keep their route. No epilogue: a linear's forward (bias) keeps the primitive.
// Figures: docs/performance.md.
constexpr std::int64_t kFp32CallMinN = 513, kFp32CallMinTnRows = 512, kFp32CallLongK = 1024,
                       kFp32CallLargeB = std::int64_t(1) << 21;
bool fp32_call_for(bool trans_a, bool trans_b, bool bias, std::int64_t m, std::int64_t n, std::int64_t k) {
  const int route = fp32_route();
  if (route == int(Fp32Kernel::call)) return onednn().sgemm != nullptr;
  if (route != int(Fp32Kernel::automatic)) return false;
  if (bias || n < kFp32CallMinN || 2 * m * n * k < kFp32PrimitiveMinFlops) return false;
  const bool form = trans_a ? !trans_b && m >= kFp32CallMinTnRows : trans_b || k >= kFp32CallLongK || n * k >= kFp32CallLargeB;
  return form && onednn().sgemm && fp32_brgemm();
}
std::atomic<std::int64_t> g_fp32_calls{0};

// Runs an fp32 block through dnnl_sgemm when fp32_call_for takes it; false otherwise.
bool fp32_block_call(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                     const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool acc) {
  if (!fp32_call_for(ta, tb, false, m, n, k)) return false;
  const OneDnn& d = onednn();
  int status;
  {
    OneOmpThread one(d);
    status = d.sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, acc ? 1.0f : 0.0f, c, ldc);
  }
  if (status != dnnl_success)
    throw std::runtime_error("gemm: oneDNN's dnnl_sgemm failed (status " + std::to_string(status) + ") on a block of " +
                             std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k));
  g_fp32_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Runs an fp32 block (operands at their place in A and B) through a kept primitive when its
// route and its operands allow (dense: a primitive's strided operands take a slower kernel), with
// `bias` in its epilogue; false when the caller must run it through OpenBLAS.
bool fp32_block_primitive(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                          const float* b, std::int64_t ldb, const float* bias, float* c, std::int64_t ldc, bool acc) {
  if (lda != (ta ? m : k) || ldb != (tb ? k : n) || ldc != n) return false;
  if (!fp32_primitive_for(ta, m, n, k)) return false;
  MatmulKey key{m, n, k, ta, tb, acc, bias != nullptr};
  key.f32 = true;
  return run_block_primitive(onednn(), key, fp32_route() == int(Fp32Kernel::automatic) ? "brg:avx512" : nullptr, a, b, bias, c);
}

bool bf16_enabled() { return g_bf16.load(std::memory_order_relaxed); }

}  // namespace gemm_impl

using namespace gemm_impl;

std::string set_gemm_precision(Precision p) { return set_gemm_precision(p, cpu::features()); }

std::string set_gemm_precision(Precision p, const cpu::Features& cpu) {
  if (p == Precision::fp32) {
    g_bf16 = false;
    return "";
  }
  std::string why;
  if (!cpu.avx512bf16 || !cpu.runs_avx512())
    why = "precision=bf16 needs a CPU with AVX512-BF16 (AMD Zen 4 and later, Intel Cooper Lake, Sapphire Rapids and later); this one has: " +
          cpu.flags();
  else if (!onednn().gemm)
    why = "precision=bf16 needs oneDNN: " + onednn().why;
  g_bf16 = why.empty();
  return why.empty() ? "" : why + "; matmuls stay fp32";
}

Precision gemm_precision() { return g_bf16 ? Precision::bf16 : Precision::fp32; }

std::int64_t fp32_call_runs() { return g_fp32_calls.load(); }
void set_bf16_kernel(Bf16Kernel k) { g_bf16_kernel = int(k); }
void set_fp32_kernel(Fp32Kernel k) { g_fp32_kernel = int(k); }

std::string fp32_kernel() {
  if (!blas().sgemm) return blas().name;
  const std::string call = "OpenBLAS";
  if (fp32_route() == int(Fp32Kernel::call))
    return onednn().sgemm ? "oneDNN's dnnl_sgemm for every block" : call + " (no dnnl_sgemm: " + onednn().why + ")";
  constexpr std::int64_t big = std::int64_t(1) << 20;  // with op(A) not transposed, automatic takes it
  if (!fp32_primitive_for(false, big, big, big))
    return fp32_route() == int(Fp32Kernel::primitive) ? call + " (no matmul primitives: " + onednn().why + onednn().no_primitives + ")" : call;
  const std::string impl = probe_impl(true);
  const std::string prim = "oneDNN matmul primitives (" + (impl.empty() ? std::string("none built") : impl) + ")";
  if (fp32_route() == int(Fp32Kernel::primitive)) return prim + " for dense blocks, else " + call;
  if (!onednn().sgemm)
    return prim + " for dense blocks of >= 16 MFLOP with op(A) not transposed, or transposed with K >= " +
           std::to_string(kFp32PrimitiveLongK) + " max(M, N); else " + call;
  return "oneDNN's dnnl_sgemm for blocks of >= 16 MFLOP without a bias and N >= " + std::to_string(kFp32CallMinN) +
         ": NT, NN with K >= " + std::to_string(kFp32CallLongK) + " or N K >= 2^21, TN of >= " + std::to_string(kFp32CallMinTnRows) +
         " rows; " + prim + " for other dense blocks of >= 16 MFLOP with op(A) not transposed, or transposed with K >= " +
         std::to_string(kFp32PrimitiveLongK) + " max(M, N); else " + call;
}

std::string bf16_kernel() {
  const OneDnn& d = onednn();
  if (!d.gemm) return "none (" + d.why + ")";
  const std::string call = "oneDNN's dnnl_gemm_bf16bf16f32";
  if (bf16_route() == int(Bf16Kernel::primitive) && !d.engine) return call + " (no matmul primitives: " + d.no_primitives + ")";
  if (!bf16_primitive_for(false, true, 1)) return call;
  const std::string impl = probe_impl(false);
  const std::string prim = "oneDNN matmul primitives (" + (impl.empty() ? std::string("none built") : impl) + ")";
  return bf16_primitive_for(true, false, 1 << 20) ? prim : prim + " for op(B) transposed or k < 1024, else " + call;
}

}  // namespace ctgrad::kernel
