// Counts heap allocations: this executable's malloc family wraps glibc's, so every allocation of
// the process (operator new, libraries, OpenMP, BLAS) is seen. Linked into ctgrad-bench and its
// libtorch peer alike, so "allocations per step" means the same on both sides.
#include <atomic>
#include <cerrno>
#include <cstddef>

#include "bench_util.hpp"

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {
std::atomic<long long> g_allocations{0}, g_library_allocations{0};
std::atomic<bool (*)()> g_inside_library{nullptr};
inline bool count() {  // true when it is not the library's
  bool (*inside)() = g_inside_library.load(std::memory_order_relaxed);
  const bool library = inside && inside();
  (library ? g_library_allocations : g_allocations).fetch_add(1, std::memory_order_relaxed);
  return !library;
}
}  // namespace
// Set by the benchmark loops during timed steps: a debugger breakpoint on bench_steady_malloc
// shows who allocates in a steady step.
extern "C" volatile int bench_in_timed_step;
volatile int bench_in_timed_step = 0;
extern "C" __attribute__((noinline)) void bench_steady_malloc() { asm volatile(""); }
namespace {
inline void count_and_flag() {
  if (count() && bench_in_timed_step) bench_steady_malloc();
}
}  // namespace

long long bench::heap_allocations() { return g_allocations.load(std::memory_order_relaxed); }
long long bench::library_allocations() { return g_library_allocations.load(std::memory_order_relaxed); }
void bench::set_library_call(bool (*inside)()) { g_inside_library = inside; }

extern "C" {
void* malloc(std::size_t n) {
  count_and_flag();
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  count_and_flag();
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  count_and_flag();
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(std::size_t align, std::size_t n) {
  count_and_flag();
  return __libc_memalign(align, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) {
  count_and_flag();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  count_and_flag();
  void* p = __libc_memalign(align, n);
  if (!p && n) return ENOMEM;
  *out = p;
  return 0;
}
}
