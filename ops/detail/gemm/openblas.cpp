#include <ctgrad/ops/detail/gemm/openblas.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include <ctgrad/ops/detail/cpu.hpp>
#include <ctgrad/ops/detail/env_text.hpp>
#include <ctgrad/ops/detail/gemm.hpp>

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

}  // namespace

namespace gemm_impl {

Blas::Blas() {
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

const Blas& blas() {
  static const Blas b;
  return b;
}

}  // namespace gemm_impl

using gemm_impl::blas;

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

std::string gemm_backend() { return blas().name; }
bool gemm_uses_blas() { return blas().sgemm != nullptr; }

}  // namespace ctgrad::kernel
