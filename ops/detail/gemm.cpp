#include <ctgrad/ops/detail/cpu.hpp>
#include <ctgrad/ops/detail/env_text.hpp>
#include <ctgrad/ops/detail/gemm.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

#include <dlfcn.h>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>  // types only: the library is loaded by path (OneDnn)
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <array>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ctgrad::kernel {
namespace {

// AddressSanitizer refuses RTLD_DEEPBIND (it would bypass its interceptors); a sanitized build
// loads OpenBLAS without it, which only matters when another BLAS is loaded in the process too.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kDeepBind = 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int kDeepBind = 0;
#else
constexpr int kDeepBind = RTLD_DEEPBIND;
#endif
#else
constexpr int kDeepBind = RTLD_DEEPBIND;
#endif

enum : int { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };
using sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using dgemm_fn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double, double*,
                          int);

// Sets (or, with null, unsets) an environment variable until the end of the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

struct Blas {
  sgemm_fn sgemm = nullptr;
  dgemm_fn dgemm = nullptr;
  std::string name;

  Blas() {
#ifdef CTGRAD_OPENBLAS
    std::string why;
    void* h = load_openblas(CTGRAD_OPENBLAS, 1, why);
    if (!h) {
      name = "reference (" + why + ")";
      std::fprintf(stderr, "ctgrad: warning: matmul uses the slow reference kernel: %s\n", why.c_str());
      return;
    }
    auto config = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_config"));
    auto core = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_corename"));
    auto get_threads = reinterpret_cast<int (*)()>(dlsym(h, "openblas_get_num_threads"));
    auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"));
    sgemm = reinterpret_cast<sgemm_fn>(dlsym(h, "cblas_sgemm"));
    dgemm = reinterpret_cast<dgemm_fn>(dlsym(h, "cblas_dgemm"));
    if (!sgemm || !dgemm || !get_threads || !set_threads) {
      sgemm = nullptr, dgemm = nullptr;
      name = std::string("reference (") + CTGRAD_OPENBLAS + " lacks the cblas/OpenBLAS entry points)";
      std::fprintf(stderr, "ctgrad: warning: matmul uses the slow reference kernel: %s\n", name.c_str());
      return;
    }
    if (get_threads() != 1) {
      // Already loaded by someone else with a pool: keep it to one thread per call, as oneTBB owns the cores.
      std::fprintf(stderr, "ctgrad: warning: OpenBLAS was already loaded with %d threads; setting it to 1\n", get_threads());
      set_threads(1);
    }
    name = "openblas, 1 thread per call (" + std::string(config ? config() : "?") + ", core " + (core ? core() : "?") + ")";
#else
    name = "reference (built without OpenBLAS)";
#endif
  }
};

const Blas& blas() {
  static const Blas b;
  return b;
}

// Reference kernel: C[i,j] (+)= sum_k A(i,k) B(k,j) through strides; rows in parallel.
template <class T>
void reference(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda,
               const T* B, std::int64_t ldb, T* C, std::int64_t ldc, bool acc) {
  const std::int64_t ar = ta ? 1 : lda, ac = ta ? lda : 1, br = tb ? 1 : ldb, bc = tb ? ldb : 1;
  parallel(M, std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(1, N * K)), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      T* c = C + i * ldc;
      if (!acc) std::fill(c, c + N, T(0));
      for (std::int64_t k = 0; k < K; ++k) {
        const T a = A[i * ar + k * ac];
        for (std::int64_t j = 0; j < N; ++j) c[j] += a * B[k * br + j * bc];
      }
    }
  });
}

template <class T>
void call(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda, const T* B,
          std::int64_t ldb, T* C, std::int64_t ldc, bool acc) {
  const int t_a = ta ? kTrans : kNoTrans, t_b = tb ? kTrans : kNoTrans;
  if constexpr (std::is_same_v<T, float>)
    blas().sgemm(kRowMajor, t_a, t_b, int(M), int(N), int(K), 1.0f, A, int(lda), B, int(ldb), acc ? 1.0f : 0.0f, C, int(ldc));
  else
    blas().dgemm(kRowMajor, t_a, t_b, int(M), int(N), int(K), 1.0, A, int(lda), B, int(ldb), acc ? 1.0 : 0.0, C, int(ldc));
}

std::atomic<int> g_max_blocks{0};  // 0: not chosen yet

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

// How one GEMM is cut: bm x bn blocks of C, and bk blocks of K.
struct Split {
  std::int64_t bm = 1, bn = 1, bk = 1;
};

// Splits the product into a grid of blocks from the shape and gemm_max_blocks() alone, never from
// the arena's thread count: at most that many blocks, each at least kMinBlock wide on the sides it
// splits and kMinWork flops, the longer of M and N halved first, and one block for small products
// (a block re-packs the parts of A and B it reads, so fewer is better). When M and N are too
// narrow to give every CPU a block (a weight gradient of a small layer: C is out x in, K is the
// token count), K is split too.
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

// For a block with a bias that runs without an epilogue: the bias written into its rows, for the
// product to be accumulated onto; returns whether the block accumulates.
template <class T>
bool bias_rows_first(const T* block_bias, T* c, std::int64_t ldc, std::int64_t m, std::int64_t n, bool acc) {
  if (!block_bias) return acc;
  for (std::int64_t r = 0; r < m; ++r) std::memcpy(c + r * ldc, block_bias, std::size_t(n) * sizeof(T));
  return true;
}

// Runs the blocks of `split`: the first K block accumulates into C, the others write partial
// products into a buffer of the pool, which are then added to C in block order, so the bits
// depend on the shape and the machine's block count only.
// run(m0, m1, n0, n1, k0, k1, c, ldc, accumulate) computes the block C[m0:m1, n0:n1] (+)=
// op(A)[m0:m1, k0:k1] op(B)[k0:k1, n0:n1] into c, the block's first element (in C or a partial).
template <class T, class Run>
void split_blocks(const Split& split, std::int64_t M, std::int64_t N, std::int64_t K, T* C, std::int64_t ldc, bool acc,
                  Run&& run) {
  const auto [bm, bn, bk] = split;
  if (bm * bn * bk == 1) {
    run(0, M, 0, N, 0, K, C, ldc, acc);
    return;
  }
  // Pooled (kernel::PooledScratch): a per-thread buffer by nesting depth grew whenever a thread
  // first split K at a new depth, which the scheduler decides (3-4 allocations in a steady step).
  std::optional<PooledScratch> scratch;
  if (bk > 1) scratch.emplace(std::size_t((bk - 1) * M * N) * sizeof(T));
  T* partial = bk > 1 ? scratch->as<T>() : nullptr;  // [bk - 1][M][N]
  parallel(bm * bn * bk, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t kb = b / (bm * bn), i = (b / bn) % bm, j = b % bn;
      const std::int64_t m0 = i * M / bm, n0 = j * N / bn;
      T* c = kb == 0 ? C + m0 * ldc + n0 : partial + (kb - 1) * M * N + m0 * N + n0;
      run(m0, (i + 1) * M / bm, n0, (j + 1) * N / bn, kb * K / bk, (kb + 1) * K / bk, c, kb == 0 ? ldc : N, kb == 0 && acc);
    }
  });
  if (bk > 1) {
    const auto add = simd::best().axpy[std::is_same_v<T, double>];  // c += 1 * p: exact, as c += p
    parallel(M, std::max<std::int64_t>(1, 16384 / N), [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t kb = 1; kb < bk; ++kb) add(partial + (kb - 1) * M * N + r * N, nullptr, C + r * ldc, N, 1.0, false);
    });
  }
}

// ---- bf16: oneDNN's bf16 x bf16 -> fp32 GEMM ----
using bf16_gemm_fn = int (*)(char, char, std::int64_t, std::int64_t, std::int64_t, float, const std::uint16_t*, std::int64_t,
                             const std::uint16_t*, std::int64_t, float, float*, std::int64_t);

// The C API functions a matmul primitive needs, loaded by name like the rest.
#define CTGRAD_DNNL_FUNCTIONS(X)                                                                                                \
  X(dnnl_engine_create) X(dnnl_stream_create) X(dnnl_memory_desc_init_by_strides) X(dnnl_matmul_desc_init)                     \
  X(dnnl_primitive_attr_create) X(dnnl_primitive_attr_destroy) X(dnnl_primitive_attr_set_scratchpad_mode)                      \
  X(dnnl_post_ops_create) X(dnnl_post_ops_destroy) X(dnnl_post_ops_append_sum) X(dnnl_primitive_attr_set_post_ops)             \
  X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_destroy) X(dnnl_primitive_desc_query) X(dnnl_primitive_desc_query_md)   \
  X(dnnl_memory_desc_get_size) X(dnnl_primitive_create) X(dnnl_memory_create) X(dnnl_memory_set_data_handle)                   \
  X(dnnl_primitive_execute) X(dnnl_memory_destroy) X(dnnl_stream_destroy) X(dnnl_primitive_destroy)

using f32_gemm_fn = int (*)(char, char, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t, const float*,
                            std::int64_t, float, float*, std::int64_t);

struct OneDnn {
  bf16_gemm_fn gemm = nullptr;
  f32_gemm_fn sgemm = nullptr;  // dnnl_sgemm: row-major, like the bf16 call
  void (*omp_set_num_threads)(int) = nullptr;
  int (*omp_get_max_threads)() = nullptr;
#define CTGRAD_DNNL_POINTER(f) decltype(&::f) f = nullptr;
  CTGRAD_DNNL_FUNCTIONS(CTGRAD_DNNL_POINTER)
#undef CTGRAD_DNNL_POINTER
  dnnl_engine_t engine = nullptr;  // null: no matmul primitives (the BLAS-like call only), for the reason:
  std::string no_primitives;
  std::string why;  // why it cannot be used
  OneDnn() {
    void* h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      why = std::string("oneDNN could not be loaded (") + dlerror() + "; run scripts/setup.sh)";
      return;
    }
    gemm = reinterpret_cast<bf16_gemm_fn>(dlsym(h, "dnnl_gemm_bf16bf16f32"));
    sgemm = reinterpret_cast<f32_gemm_fn>(dlsym(h, "dnnl_sgemm"));
    omp_set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "omp_set_num_threads"));
    omp_get_max_threads = reinterpret_cast<int (*)()>(dlsym(h, "omp_get_max_threads"));
    if (!gemm || !omp_set_num_threads || !omp_get_max_threads) {
      gemm = nullptr, sgemm = nullptr;  // both run inside OneOmpThread
      why = "libdnnl.so.2 lacks dnnl_gemm_bf16bf16f32 or its OpenMP runtime";
      return;
    }
    bool all = true;
#define CTGRAD_DNNL_LOAD(f)                          \
  f = reinterpret_cast<decltype(f)>(dlsym(h, #f)); \
  all = all && f;
    CTGRAD_DNNL_FUNCTIONS(CTGRAD_DNNL_LOAD)
#undef CTGRAD_DNNL_LOAD
    if (!all) no_primitives = "libdnnl.so.2 lacks part of the matmul primitive C API";
    else if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) engine = nullptr, no_primitives = "oneDNN's CPU engine could not be created";
  }
};
// Never destroyed: threads that end during the process's exit still release their oneDNN objects
// through it.
const OneDnn& onednn() {
  static const OneDnn* d = new OneDnn;
  return *d;
}

thread_local int t_in_onednn = 0;  // oneDNN calls this thread is in (inside_onednn_call)

// oneDNN's OpenMP runtime runs one thread, the calling one, for the scope (oneTBB owns the cores);
// the thread's setting is restored afterwards for whatever else uses OpenMP there. Every call into
// oneDNN that runs or builds a kernel is inside one of these, so it also marks the thread as inside
// oneDNN, for the allocation counters.
class OneOmpThread {
 public:
  explicit OneOmpThread(const OneDnn& d) : d_(d), old_((++t_in_onednn, d.omp_get_max_threads())) {
    d.omp_set_num_threads(1);  // the OpenMP runtime's first call on a thread allocates: counted as oneDNN's
  }
  ~OneOmpThread() {
    --t_in_onednn;
    d_.omp_set_num_threads(old_);
  }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  const OneDnn& d_;
  int old_;
};

// A matmul primitive for one block shape on dense operands: C[m, n] (+)= op(A)[m, k] op(B)[k, n]
// (+ bias[n] on every row: its epilogue), A stored m x k (k x m when transposed), B k x n (n x k),
// fp32 or bf16; C m x n and the bias fp32. Built on first use with one OpenMP thread, so it plans
// for and runs in the calling thread, and kept for the process (one per block shape a program
// uses). A shape oneDNN cannot build has no primitive and keeps the other route (OpenBLAS, or
// the BLAS-like bf16 call).
struct MatmulKey {
  std::int64_t m, n, k;
  bool ta, tb, acc, bias = false;
  bool f32 = false;  // fp32 operands (else bf16)
  bool operator==(const MatmulKey&) const = default;
};
struct MatmulKeyHash {
  std::size_t operator()(const MatmulKey& k) const {
    std::size_t h = std::hash<std::int64_t>()(k.m);
    for (std::int64_t v : {k.n, k.k, std::int64_t(k.ta) | std::int64_t(k.tb) << 1 | std::int64_t(k.acc) << 2 | std::int64_t(k.bias) << 3 |
                                          std::int64_t(k.f32) << 4})
      h = h * 1000003u ^ std::hash<std::int64_t>()(v);
    return h;
  }
};
// What one execution of a primitive needs besides the operands: a stream, a memory object per
// argument (its data pointer set per call) and the scratchpad. A primitive keeps a set per CPU,
// made with it, and an execution takes one for its duration (it runs to its end in the calling
// thread: a thread uses one set at a time), so which thread runs which block shape first, which
// the scheduler decides, never makes a later step allocate.
struct ExecSet {
  dnnl_stream_t stream = nullptr;
  std::array<dnnl_memory_t, 5> mem{};  // a, b, c, scratchpad, bias
  std::vector<std::byte> storage;      // the scratchpad, 64-byte aligned within
  void* scratchpad = nullptr;
};
struct Matmul {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t a{}, b{}, c{}, scratch{}, bias{};
  std::size_t scratch_bytes = 0;
  bool has_bias = false;
  std::string impl;  // the kernel oneDNN chose, e.g. "brg:avx512_core_amx_bf16"
  std::mutex sets_mutex;
  std::vector<std::unique_ptr<ExecSet>> sets;
  std::vector<ExecSet*> free_sets;
  Matmul() = default;
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;
  ~Matmul();  // releases the primitive and its execution sets (kept ones never end)
};

// An error naming the primitive's block when a oneDNN call on it failed.
void check_dnnl(const Matmul& mm, dnnl_status_t status, const char* step) {
  if (status != dnnl_success)
    throw std::runtime_error(std::string("matmul: oneDNN's ") + (mm.a.data_type == dnnl_f32 ? "fp32" : "bf16") + " matmul primitive (" +
                             mm.impl + ") for a block of " + std::to_string(mm.a.dims[0]) + "x" + std::to_string(mm.b.dims[1]) + "x" +
                             std::to_string(mm.a.dims[1]) + ": " + step + " failed with status " + std::to_string(int(status)));
}

// A new execution set for `mm`, added to its free list; an error naming the block if oneDNN fails.
void add_exec_set(const OneDnn& d, Matmul& mm) {
  auto set = std::make_unique<ExecSet>();
  ExecSet& e = *set;
  mm.sets.push_back(std::move(set));  // released with the primitive, even if the set is incomplete
  const auto check = [&](dnnl_status_t status, const char* step) { check_dnnl(mm, status, step); };
  check(d.dnnl_stream_create(&e.stream, d.engine, dnnl_stream_default_flags), "creating a stream");
  const dnnl_memory_desc_t* descs[5] = {&mm.a, &mm.b, &mm.c, &mm.scratch, &mm.bias};
  const bool used[5] = {true, true, true, mm.scratch_bytes > 0, mm.has_bias};
  for (std::size_t i = 0; i < 5; ++i)
    if (used[i]) check(d.dnnl_memory_create(&e.mem[i], descs[i], d.engine, DNNL_MEMORY_NONE), "creating a memory object");
  if (mm.scratch_bytes > 0) {
    constexpr std::size_t kAlign = 64;
    e.storage.resize(mm.scratch_bytes + kAlign);
    e.scratchpad = e.storage.data() + (kAlign - reinterpret_cast<std::uintptr_t>(e.storage.data()) % kAlign) % kAlign;
  }
  mm.free_sets.push_back(&e);
}

void release_exec_sets(const OneDnn& d, Matmul& mm) {
  for (auto& e : mm.sets) {
    for (dnnl_memory_t m : e->mem)
      if (m) d.dnnl_memory_destroy(m);
    if (e->stream) d.dnnl_stream_destroy(e->stream);
  }
  mm.sets.clear(), mm.free_sets.clear();
}

Matmul::~Matmul() {
  const OneDnn& d = onednn();
  release_exec_sets(d, *this);
  if (primitive) d.dnnl_primitive_destroy(primitive);
}

std::unique_ptr<Matmul> make_matmul(const OneDnn& d, const MatmulKey& key) {
  auto made = std::make_unique<Matmul>();
  Matmul& mm = *made;
  mm.has_bias = key.bias;
  const dnnl_dims_t a_dims = {key.m, key.k}, a_strides = {key.ta ? 1 : key.k, key.ta ? key.m : 1};
  const dnnl_dims_t b_dims = {key.k, key.n}, b_strides = {key.tb ? 1 : key.n, key.tb ? key.k : 1};
  const dnnl_dims_t c_dims = {key.m, key.n}, c_strides = {key.n, 1}, bias_dims = {1, key.n};
  dnnl_matmul_desc_t desc;
  const dnnl_data_type_t operands = key.f32 ? dnnl_f32 : dnnl_bf16;
  if (d.dnnl_memory_desc_init_by_strides(&mm.a, 2, a_dims, operands, a_strides) != dnnl_success ||
      d.dnnl_memory_desc_init_by_strides(&mm.b, 2, b_dims, operands, b_strides) != dnnl_success ||
      d.dnnl_memory_desc_init_by_strides(&mm.c, 2, c_dims, dnnl_f32, c_strides) != dnnl_success ||
      (key.bias && d.dnnl_memory_desc_init_by_strides(&mm.bias, 2, bias_dims, dnnl_f32, c_strides) != dnnl_success) ||
      d.dnnl_matmul_desc_init(&desc, &mm.a, &mm.b, key.bias ? &mm.bias : nullptr, &mm.c) != dnnl_success)
    return made;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t post = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  bool ok = d.dnnl_primitive_attr_create(&attr) == dnnl_success &&
            d.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
  if (ok && key.acc)  // C += product: a sum post-op
    ok = d.dnnl_post_ops_create(&post) == dnnl_success && d.dnnl_post_ops_append_sum(post, 1.0f) == dnnl_success &&
         d.dnnl_primitive_attr_set_post_ops(attr, post) == dnnl_success;
  {
    OneOmpThread one(d);
    if (ok && d.dnnl_primitive_desc_create(&pd, &desc, attr, d.engine, nullptr) == dnnl_success) {
      const char* impl = nullptr;
      if (d.dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) mm.impl = impl;
      if (const dnnl_memory_desc_t* s = d.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) {
        mm.scratch = *s;
        mm.scratch_bytes = d.dnnl_memory_desc_get_size(s);
      }
      if (d.dnnl_primitive_create(&mm.primitive, pd) != dnnl_success) mm.primitive = nullptr;
    }
  }
  if (pd) d.dnnl_primitive_desc_destroy(pd);
  if (post) d.dnnl_post_ops_destroy(post);
  if (attr) d.dnnl_primitive_attr_destroy(attr);
  return made;
}

// Building one takes 0.35-0.6 ms and keeps about 90 KB (measured on Emerald Rapids), plus its
// execution sets (a scratchpad each, sized by oneDNN for the shape). At most
// 4,096 are kept (set_bf16_primitives_kept): a program whose shapes keep changing builds a primitive for each further
// shape on every call (slow, with a warning) rather than change route, so a shape's bits never
// depend on which shapes came first or which thread asked first.
std::atomic<std::size_t> g_max_matmuls{4096};

// The kept primitive for `key`, or null when none is kept and there is no room.
Matmul* kept_matmul(const OneDnn& d, const MatmulKey& key) {
  static std::mutex mutex;
  // Never destroyed (nor their primitives): a thread may run one until the process ends.
  static auto* made = new std::unordered_map<MatmulKey, std::unique_ptr<Matmul>, MatmulKeyHash>;
  std::lock_guard lock(mutex);
  auto it = made->find(key);
  if (it != made->end()) return it->second.get();
  if (made->size() >= g_max_matmuls.load()) {
    static bool warned = false;
    if (!std::exchange(warned, true))
      std::fprintf(stderr, "ctgrad: warning: %zu GEMM block shapes have oneDNN primitives; further shapes build theirs on "
                           "every call (slow; CTGRAD_FP32_GEMM=openblas and CTGRAD_BF16_GEMM=call avoid it)\n", made->size());
    return nullptr;
  }
  std::unique_ptr<Matmul> mm = make_matmul(d, key);
  if (mm->primitive)  // a set per thread that may run it at once: the CPUs, or the calling arena's threads if more
    for (int i = 0; i < std::max(tbb::info::default_concurrency(), tbb::this_task_arena::max_concurrency()); ++i) add_exec_set(d, *mm);
  return made->emplace(key, std::move(mm)).first->second.get();
}

std::atomic<std::int64_t> g_primitive_runs[2]{};  // bf16, fp32

// The shape whose primitive tells which kernels oneDNN builds on this host.
MatmulKey probe_key(bool f32) {
  MatmulKey k{256, 256, 256, false, true, false};
  k.f32 = f32;
  return k;
}

// Runs `mm` on one of its execution sets. Any failure is an error: a silent change of route would
// make the bits depend on the thread.
void run_matmul(const OneDnn& d, Matmul& mm, const void* a, const void* b, const float* bias, float* c) {
  ExecSet* e = nullptr;
  {
    std::lock_guard lock(mm.sets_mutex);
    if (mm.free_sets.empty()) add_exec_set(d, mm);
    e = mm.free_sets.back();
    mm.free_sets.pop_back();
  }
  struct Give {  // back to the free list, however the run ends
    Matmul& mm;
    ExecSet* e;
    ~Give() {
      std::lock_guard lock(mm.sets_mutex);
      mm.free_sets.push_back(e);
    }
  } give{mm, e};
  const auto check = [&](dnnl_status_t status, const char* step) { check_dnnl(mm, status, step); };
  const int kinds[5] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD, DNNL_ARG_BIAS};
  void* handles[5] = {const_cast<void*>(a), const_cast<void*>(b), c, e->scratchpad, const_cast<float*>(bias)};
  dnnl_exec_arg_t args[5];
  int n_args = 0;
  for (std::size_t i = 0; i < 5; ++i)
    if (e->mem[i] && (i != 4 || bias)) {
      check(d.dnnl_memory_set_data_handle(e->mem[i], handles[i]), "setting an operand's memory");
      args[n_args++] = {kinds[i], e->mem[i]};
    }
  OneOmpThread one(d);
  check(d.dnnl_primitive_execute(mm.primitive, e->stream, n_args, args), "running it");  // C may be partly written: no second try
  g_primitive_runs[mm.a.data_type == dnnl_f32].fetch_add(1, std::memory_order_relaxed);
}

// Runs the block through a primitive when oneDNN builds one for it whose kernel's name contains
// `need_impl` (when given); false when it does not (the caller takes its other route). The answer
// depends on the shape alone.
bool run_block_primitive(const OneDnn& d, const MatmulKey& key, const char* need_impl, const void* a, const void* b,
                         const float* bias, float* c) {
  const auto usable = [&](const Matmul& mm) { return mm.primitive && (!need_impl || mm.impl.find(need_impl) != std::string::npos); };
  if (Matmul* kept = kept_matmul(d, key)) {
    if (!usable(*kept)) return false;
    run_matmul(d, *kept, a, b, bias, c);
    return true;
  }
  const std::unique_ptr<Matmul> once = make_matmul(d, key);  // no room to keep it
  if (!usable(*once)) return false;
  run_matmul(d, *once, a, b, bias, c);
  return true;
}

std::atomic<int> g_bf16_kernel{int(Bf16Kernel::automatic)};

// Automatic: primitives where oneDNN runs them on AMX tiles (asked once, of a probe shape).
bool amx_primitives() {
  static const bool amx = [] {
    const OneDnn& d = onednn();
    if (!d.engine) return false;
    const Matmul* probe = kept_matmul(d, probe_key(false));
    return probe && probe->primitive && probe->impl.find("amx") != std::string::npos;
  }();
  return amx;
}

// CTGRAD_BF16_GEMM, read once: -1 none (automatic), else a Bf16Kernel.
int bf16_kernel_from_env() {
  static const int k = [] {
    const char* e = std::getenv("CTGRAD_BF16_GEMM");
    if (!e || !*e) return -1;
    if (std::strcmp(e, "call") == 0) return int(Bf16Kernel::call);
    if (std::strcmp(e, "primitive") == 0) return int(Bf16Kernel::primitive);
    std::fprintf(stderr, "ctgrad: warning: ignoring CTGRAD_BF16_GEMM=%s (call or primitive)\n", env_shown(e).c_str());
    return -1;
  }();
  return k;
}

// Whether a bf16 block of this form goes through a primitive. Automatic, on AMX: the forms where
// primitives measured faster than the BLAS-like call on Emerald Rapids, with both routes
// alternating on the same shapes (docs/performance.md): op(B) transposed (a linear's forward,
// attention's Q K^T; 1.0-2.1x) and neither transposed with k < 1024 (a small layer's dX,
// attention's P V; 1.14-1.19x, but 0.76-0.96x at k of 1024-4096); never op(A) transposed (a weight
// gradient: 0.93x).
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

// CTGRAD_FP32_GEMM, read once: -1 none (automatic), else an Fp32Kernel.
int fp32_kernel_from_env() {
  static const int k = [] {
    const char* e = std::getenv("CTGRAD_FP32_GEMM");
    if (!e || !*e) return -1;
    if (std::strcmp(e, "openblas") == 0) return int(Fp32Kernel::openblas);
    if (std::strcmp(e, "primitive") == 0) return int(Fp32Kernel::primitive);
    if (std::strcmp(e, "call") == 0) return int(Fp32Kernel::call);
    std::fprintf(stderr, "ctgrad: warning: ignoring CTGRAD_FP32_GEMM=%s (openblas, primitive or call)\n", env_shown(e).c_str());
    return -1;
  }();
  return k;
}
int fp32_route() {
  const int route = g_fp32_kernel.load(std::memory_order_relaxed);
  return route == int(Fp32Kernel::automatic) && fp32_kernel_from_env() >= 0 ? fp32_kernel_from_env() : route;
}

// Automatic: primitives where oneDNN runs fp32 ones with its AVX-512 brgemm kernels (asked once,
// of a probe shape).
bool fp32_brgemm() {
  static const bool brg = [] {
    const OneDnn& d = onednn();
    if (!d.engine) return false;
    const Matmul* probe = kept_matmul(d, probe_key(true));
    return probe && probe->primitive && probe->impl.find("brg:avx512") != std::string::npos;
  }();
  return brg;
}

// Whether an fp32 block of this shape goes through a primitive. Automatic, on AVX-512 brgemm
// hosts: op(A) not transposed (a linear's forward and dX: 1.0-1.26x OpenBLAS on Emerald Rapids,
// with both routes alternating on the same shapes; docs/performance.md); op(A) transposed (a
// weight gradient) only when K is long against C's sides, K >= 8 max(M, N): alone 0.96-1.10x
// OpenBLAS, in ViT's steps (K = 3,200 a block, C at most 384 x 128) the linear VJPs 10% faster,
// while weight gradients of shorter K measured 0.90-1.03x alone and no faster in GPT or the
// Transformer. Attention's per-head products read heads interleaved by stride: not dense, so not
// a primitive (fp32_block_primitive): OpenBLAS, or dnnl_sgemm for the rare one that meets its rule.
// Blocks of fewer flops stay on OpenBLAS in automatic (the smallest measured faster had 37
// MFLOP): a primitive's JIT build (0.35-0.6 ms, once per shape) and per-call set-up are not repaid
// on a tiny model's products, and a tiny model's short run never loads oneDNN (a kill-and-resume
// round of the tiny GPT lasted 0.1 s longer with them).
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
// large, K >= 1024 or N K >= 2^21; TN ones (a weight gradient) of at least 512 rows. Measured on
// model 167 (docs/performance.md), two blocks on two threads at once, against what automatic ran
// before: NT 1.04-1.19x, NN of that rule 1.06-2.0x (the primitive falls to half on a 768-wide
// model's MLP dX), TN of that rule 1.09-1.16x (OpenBLAS); NN blocks of a smaller B ran 0.91-0.96x
// (1024 x 1024 x 256, 1024 x 2048 x 512, 1024 x 1024 x 768), TN ones 512 wide 0.70-0.83x and
// 384 rows 0.99x: those keep their route. Below 513 columns the three kernels were within 10% of
// each other alone. No epilogue: a linear's forward (bias) keeps the primitive.
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

// C (+)= op(A) op(B) in bf16 with fp32 accumulation; with `bias` (then not accumulating), C =
// op(A) op(B) + bias on every row, the bias added by a primitive's epilogue or, for a block that
// takes the BLAS-like call, written into the block before the product is accumulated onto it.
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

}  // namespace

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

std::string openblas_core_choice(bool warn) {
  const cpu::Features& cpu = cpu::features();
  // The kernels are ctgrad's choice, by the CPU's instruction sets: OpenBLAS picks them by CPU
  // model, and a release does not know the CPUs made after it (0.3.21 runs its AVX2 kernels on a
  // Zen 5: 121 against 230 GFLOP/s on 2 cores with the AVX-512 ones). OPENBLAS_CORETYPE, which
  // the host may set for other programs (this project's machines set Haswell), is not followed;
  // CTGRAD_BLAS_CORE forces a core when the CPU runs it (tests pin the AVX2 kernels with it).
  const char* forced = std::getenv("CTGRAD_BLAS_CORE");
  if (forced && *forced) {
    const std::string lacks = cpu::openblas_core_lacks(forced, cpu);
    if (lacks.empty()) return forced;
    if (warn)
      std::fprintf(stderr, "ctgrad: warning: ignoring CTGRAD_BLAS_CORE=%s (%s on this CPU)\n", env_shown(forced).c_str(),
                   lacks == "unknown core" ? "an unknown core" : ("needs " + lacks + ", absent").c_str());
  }
  return std::string(cpu::best_openblas_core(cpu));
}

void* load_openblas(const std::string& path, int threads, std::string& why) {
  const cpu::Features& cpu = cpu::features();
  const std::string choice = openblas_core_choice(true);
  std::optional<std::string> keep;
  if (!choice.empty()) keep = choice;
  void* h = nullptr;
  {
    // OpenBLAS reads both variables while it loads (no core: it detects the CPU itself); with 1
    // thread it starts no worker threads.
    const std::string n = std::to_string(threads);
    ScopedEnv core_type("OPENBLAS_CORETYPE", keep ? keep->c_str() : nullptr);
    ScopedEnv num_threads("OPENBLAS_NUM_THREADS", n.c_str());
    // DEEPBIND: its own symbols first, even if another BLAS is already loaded.
    h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | kDeepBind);
  }
  if (!h) {
    why = "could not load " + path + ": " + dlerror() + "; run scripts/setup.sh";
    return nullptr;
  }
  // The kernels it chose must run here (the same library may have been loaded before us, with
  // another environment). Its own detection checks the OS's register state, so an unknown core
  // name it chose itself (a newer OpenBLAS) is trusted.
  auto corename = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_corename"));
  const std::string core = corename ? corename() : "";
  const std::string lacks = cpu::openblas_core_lacks(core, cpu);
  if (!lacks.empty() && !(lacks == "unknown core" && !keep)) {
    why = path + " runs its " + core + " kernels, which need " + lacks + " (this CPU: " + cpu.flags() + ")";
    return nullptr;  // left loaded: unloading OpenBLAS is not safe, and nothing calls it
  }
  return h;
}

template <class T>
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda, const T* B,
          std::int64_t ldb, T* C, std::int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    if (g_bf16.load(std::memory_order_relaxed) && 2 * M * N * K >= kBf16MinFlops) {
      gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, nullptr, C, ldc, accumulate);
      return;
    }
  if (!blas().sgemm) {
    reference(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    return;
  }
  split_blocks(choose_split(M, N, K), M, N, K, C, ldc, accumulate,
               [&](std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1, std::int64_t k0, std::int64_t k1, T* c,
                   std::int64_t ldc_block, bool acc_block) {
                 const T* a = ta ? A + k0 * lda + m0 : A + m0 * lda + k0;
                 const T* b = tb ? B + n0 * ldb + k0 : B + k0 * ldb + n0;
                 if constexpr (std::is_same_v<T, float>)
                   if (fp32_block_call(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, c, ldc_block, acc_block) ||
                       fp32_block_primitive(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, nullptr, c, ldc_block, acc_block))
                     return;
                 call(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, c, ldc_block, acc_block);
               });
}

template <class T>
void gemm_bias(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda, const T* B,
               std::int64_t ldb, const T* bias, T* C, std::int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (g_bf16.load(std::memory_order_relaxed) && K > 0 && 2 * M * N * K >= kBf16MinFlops) {
      gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc, false);
      return;
    }
  if constexpr (std::is_same_v<T, float>)
    if (K > 0 && blas().sgemm && fp32_primitive_for(ta, M, N, K)) {  // the bias in a primitive's epilogue, block by block
      split_blocks(choose_split(M, N, K), M, N, K, C, ldc, false,
                   [&](std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1, std::int64_t k0, std::int64_t k1, T* c,
                       std::int64_t ldc_block, bool acc_block) {
                     const T* a = ta ? A + k0 * lda + m0 : A + m0 * lda + k0;
                     const T* b = tb ? B + n0 * ldb + k0 : B + k0 * ldb + n0;
                     const T* block_bias = k0 == 0 ? bias + n0 : nullptr;  // once: not into K blocks' partials
                     if (fp32_block_primitive(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, block_bias, c, ldc_block, acc_block))
                       return;
                     acc_block = bias_rows_first(block_bias, c, ldc_block, m1 - m0, n1 - n0, acc_block);
                     call(ta, tb, m1 - m0, n1 - n0, k1 - k0, a, lda, b, ldb, c, ldc_block, acc_block);
                   });
      return;
    }
  parallel(M, std::max<std::int64_t>(1, 16384 / N), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) std::memcpy(C + r * ldc, bias, std::size_t(N) * sizeof(T));
  });
  gemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, true);
}

Bf16OperandReuse::Bf16OperandReuse() : previous_(t_reuse), active_(g_bf16.load(std::memory_order_relaxed)) {
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
std::int64_t bf16_primitive_runs() { return g_primitive_runs[0].load(); }
std::int64_t fp32_primitive_runs() { return g_primitive_runs[1].load(); }
std::int64_t fp32_call_runs() { return g_fp32_calls.load(); }
bool inside_onednn_call() { return t_in_onednn > 0; }
void set_bf16_primitives_kept(std::size_t n) { g_max_matmuls = n; }

std::string gemm_backend() { return blas().name; }

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
  const Matmul* probe = kept_matmul(onednn(), probe_key(true));
  const std::string prim = "oneDNN matmul primitives (" + (probe && !probe->impl.empty() ? probe->impl : std::string("none built")) + ")";
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
  const Matmul* probe = kept_matmul(d, probe_key(false));
  const std::string prim = "oneDNN matmul primitives (" + (probe && !probe->impl.empty() ? probe->impl : std::string("none built")) + ")";
  return bf16_primitive_for(true, false, 1 << 20) ? prim : prim + " for op(B) transposed or k < 1024, else " + call;
}
bool gemm_uses_blas() { return blas().sgemm != nullptr; }

template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,
                          std::int64_t, float*, std::int64_t, bool);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t,
                           const double*, std::int64_t, double*, std::int64_t, bool);
template void gemm_bias<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,
                               std::int64_t, const float*, float*, std::int64_t);
template void gemm_bias<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t,
                                const double*, std::int64_t, const double*, double*, std::int64_t);

}  // namespace ctgrad::kernel
