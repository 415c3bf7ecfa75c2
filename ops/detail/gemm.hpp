// GEMM for the matmul op: C[M,N] = op(A)[M,K] op(B)[K,N] (+ C when accumulate), row-major.
//
// Backend: OpenBLAS (Debian libopenblas0-pthread), loaded by path into its own symbol scope so that
// another BLAS in the process cannot capture it, with OPENBLAS_NUM_THREADS=1 at load so it starts
// no threads of its own; oneTBB drives it, one call per task. (Its single-threaded build is not
// safe to call from two threads at once: measured 4 wrong results in 3000 concurrent calls.) The
// work is split into blocks chosen from the shape alone, never from the thread count, so results
// are bitwise identical on any number of threads (OpenBLAS picks different kernels for different
// block sizes, so a thread-dependent split would not be): a grid of up to gemm_max_blocks() blocks
// over M and N, and over K as well when C is too narrow to give every CPU a block (a small layer's
// weight gradient), the K blocks' partial products added in block order. Why not our own
// micro-kernel: docs/performance.md.
//
// fp32 blocks go through oneDNN instead where it is faster (Fp32Kernel below): matmul primitives
// for dense blocks, its BLAS-like dnnl_sgemm for wide ones without a bias, one thread per block,
// with the same shape-only split.
//
// Mixed precision (set_gemm_precision(Precision::bf16)): float GEMMs round both operands to
// bfloat16 and accumulate in fp32 through oneDNN (AVX512-BF16 or AMX kernels), loaded by path like
// OpenBLAS and run one thread per block under the same shape-only split: its BLAS-like
// dnnl_gemm_bf16bf16f32, or matmul primitives where they are faster (bf16_kernel below).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <ctgrad/ops/precision.hpp>

namespace ctgrad::cpu {
struct Features;
}

namespace ctgrad::kernel {

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda,
          const T* B, std::int64_t ldb, T* C, std::int64_t ldc, bool accumulate);

// C[M,N] = op(A) op(B) + bias[N] on every row (a linear's forward). Matmul primitives (fp32 or
// bf16) add the bias in their epilogue; otherwise C's rows are set to the bias and the product
// accumulated onto them.
template <class T>
void gemm_bias(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda,
               const T* B, std::int64_t ldb, const T* bias, T* C, std::int64_t ldc);

// Within its scope, the bf16 GEMMs called on this thread keep their operands' bf16 copies, and a
// later one reading the same memory with the same shape, leading dimension and block layout takes
// the copy instead of converting again: for an op whose GEMMs share an operand (a linear's VJP
// reads dY for dX and again for dW). The caller promises that memory does not change within the
// scope. GEMMs its thread runs for other work while it waits (stolen tasks) do not use it. At
// fp32 precision it does nothing.
class Bf16OperandReuse {
 public:
  Bf16OperandReuse();
  ~Bf16OperandReuse();
  Bf16OperandReuse(const Bf16OperandReuse&) = delete;
  Bf16OperandReuse& operator=(const Bf16OperandReuse&) = delete;

 private:
  void* previous_;
  bool active_;
};
std::int64_t bf16_conversions();     // operands converted to bf16 so far, process-wide (tests)
std::int64_t bf16_primitive_runs();  // bf16 blocks run through a matmul primitive so far (tests)
std::int64_t fp32_primitive_runs();  // fp32 blocks run through a matmul primitive so far (tests)
std::int64_t fp32_call_runs();       // fp32 blocks run through dnnl_sgemm so far (tests)
// True while this thread is inside a call into oneDNN that builds or runs a kernel. oneDNN 2.6's
// C API allocates on every primitive execution (its argument map: about 7 small blocks, freed
// before it returns), which no caller can avoid; allocation counters (test_alloc, ctgrad-bench)
// count those apart from ctgrad's own, which a steady step keeps at 0.
bool inside_onednn_call();
// At most this many primitives are kept (4,096); past it a new block shape builds its primitive on
// every call, same route and bits, slower, with a warning. Lowering it keeps those already kept.
void set_bf16_primitives_kept(std::size_t n);

// Loads an OpenBLAS library by path into its own symbol scope (RTLD_DEEPBIND), with `threads`
// threads of its own and the kernels of cpu::best_openblas_core (CTGRAD_BLAS_CORE forces another
// core the CPU runs; OPENBLAS_CORETYPE is not followed), making sure the kernels it runs need
// nothing this CPU lacks: a library that still runs such a core is refused. Null, with the reason
// in `why`, when it cannot be used.
void* load_openblas(const std::string& path, int threads, std::string& why);

// The OpenBLAS core load_openblas asks for: CTGRAD_BLAS_CORE when this CPU runs it (a warning
// otherwise, when `warn`), else cpu::best_openblas_core; "" lets OpenBLAS detect the CPU.
std::string openblas_core_choice(bool warn = false);

// The precision of float GEMMs (ops/precision.hpp: set_gemm_precision, gemm_precision). The
// overload below judges as on the CPU `cpu` (tests).
// GEMMs of fewer than kBf16MinFlops stay fp32 at bf16 precision (attention's per-head products at
// short sequences): their operand conversion and oneDNN's per-call set-up cost more than bf16 saves.
inline constexpr std::int64_t kBf16MinFlops = std::int64_t(1) << 21;
std::string set_gemm_precision(Precision p, const cpu::Features& cpu);

// Which oneDNN entry runs a bf16 block. automatic: on AMX hosts, matmul primitives (one per block
// shape, built on first use and kept; the operands' bf16 copies are laid out block by block, dense,
// as they need) for the forms where they ran faster than oneDNN's BLAS-like call: op(B)
// transposed (a linear's forward), and neither transposed with k < 1024 (a small layer's dX); the
// call elsewhere, for a C block that is not dense, and on hosts without
// AMX. CTGRAD_BF16_GEMM=primitive|call overrides automatic; the setter (tests, benchmarks)
// overrides both. Figures: docs/performance.md.
enum class Bf16Kernel { automatic, call, primitive };
void set_bf16_kernel(Bf16Kernel k);
std::string bf16_kernel();  // what bf16 blocks run through on this host, for benchmarks' output

// Which kernel runs an fp32 block. automatic: oneDNN matmul primitives (one per block shape, built
// on first use and kept, like bf16's) where oneDNN runs them with its AVX-512 brgemm kernels, for
// op(A) not transposed (a linear's forward and dX) or transposed with K >= 8 max(M, N) (a weight
// gradient of many tokens and a small layer, as ViT's), blocks of at least 16 MFLOP whose operands
// are dense, where they ran faster than OpenBLAS; OpenBLAS for other weight gradients, strided blocks
// (attention's heads), smaller blocks (a primitive's JIT build is not repaid; a tiny model never
// loads oneDNN), hosts without AVX-512 or oneDNN. Before those, on the same hosts, blocks of at
// least 16 MFLOP without a bias and N >= 513 run oneDNN's BLAS-like dnnl_sgemm, one thread each:
// NT (a tied output layer), NN with a large B (K >= 1024 or N K >= 2^21: a wide MLP's dX), TN of
// >= 512 rows (faster than the route they had; figures: docs/performance.md).
// `primitive` takes every dense block, `call` every block through dnnl_sgemm. CTGRAD_FP32_GEMM=
// primitive|openblas|call overrides automatic; the setter (tests, benchmarks) overrides both.
// Double GEMMs always run on OpenBLAS.
enum class Fp32Kernel { automatic, openblas, primitive, call };
void set_fp32_kernel(Fp32Kernel k);
std::string fp32_kernel();  // what fp32 blocks run through on this host, for benchmarks' output

// The most blocks one GEMM is split into: the CPUs this process may use (oneTBB's default
// concurrency: affinity mask and cgroup quota) rounded up to a power of two, or CTGRAD_GEMM_BLOCKS.
// A property of the machine, not of an arena: 1 and 16 threads on one host give the same bits; a
// process confined to another CPU count (taskset, a container's quota) may split, and round, otherwise.
// The setter is for tests and benchmarks (a host with more cores, simulated).
int gemm_max_blocks();
void set_gemm_max_blocks(int n);

// "openblas, 1 thread per call (...)" or "reference (...why...)".
std::string gemm_backend();
bool gemm_uses_blas();

}  // namespace ctgrad::kernel
