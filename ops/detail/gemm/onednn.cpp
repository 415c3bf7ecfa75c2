#include <ctgrad/ops/detail/gemm/onednn.hpp>

#include <dlfcn.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ctgrad/ops/detail/gemm.hpp>

namespace ctgrad::kernel {
namespace gemm_impl {

OneDnn::OneDnn() {
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

const OneDnn& onednn() {
  static const OneDnn* d = new OneDnn;
  return *d;
}

thread_local int t_in_onednn = 0;

namespace {
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

// Building one takes under a millisecond and keeps about 90 KB, plus its execution sets (a
// scratchpad each, sized by oneDNN for the shape). At most 4,096 are kept (set_bf16_primitives_kept): a program whose shapes keep changing builds a primitive for each further
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

// The shape whose primitive tells which kernels oneDNN builds on this host.
MatmulKey probe_key(bool f32) {
  MatmulKey k{256, 256, 256, false, true, false};
  k.f32 = f32;
  return k;
}

}  // namespace

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

std::string probe_impl(bool f32) {
  const OneDnn& d = onednn();
  if (!d.engine) return "";
  const Matmul* probe = kept_matmul(d, probe_key(f32));
  return probe && probe->primitive ? probe->impl : "";
}

}  // namespace gemm_impl

using namespace gemm_impl;

std::int64_t bf16_primitive_runs() { return g_primitive_runs[0].load(); }
std::int64_t fp32_primitive_runs() { return g_primitive_runs[1].load(); }
bool inside_onednn_call() { return t_in_onednn > 0; }
void set_bf16_primitives_kept(std::size_t n) { g_max_matmuls = n; }

}  // namespace ctgrad::kernel
