// oneDNN, loaded by path (libdnnl.so.2) like OpenBLAS: its BLAS-like calls (bf16 x bf16 -> fp32,
// and fp32) and its matmul primitives, one per block shape, built on first use and kept. Every
// call runs on one thread, the calling one (oneTBB owns the cores).
#pragma once
#include <oneapi/dnnl/dnnl.h>  // types only: the library is loaded by path

#include <cstdint>
#include <string>

namespace ctgrad::kernel::gemm_impl {

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
  OneDnn();
};

// Never destroyed: threads that end during the process's exit still release their oneDNN objects
// through it.
const OneDnn& onednn();

extern thread_local int t_in_onednn;  // oneDNN calls this thread is in (inside_onednn_call)

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

// Runs the block through a primitive when oneDNN builds one for it whose kernel's name contains
// `need_impl` (when given); false when it does not (the caller takes its other route). The answer
// depends on the shape alone.
bool run_block_primitive(const OneDnn& d, const MatmulKey& key, const char* need_impl, const void* a, const void* b,
                         const float* bias, float* c);

// The kernel oneDNN builds for a probe shape (256^3, op(B) transposed) in fp32 or bf16, e.g.
// "brg:avx512_core_amx_bf16": which kernels it runs on this host; "" when it builds none.
std::string probe_impl(bool f32);

}  // namespace ctgrad::kernel::gemm_impl
