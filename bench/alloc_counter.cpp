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
std::atomic<long long> g_allocations{0};
inline void count() { g_allocations.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

long long bench::heap_allocations() { return g_allocations.load(std::memory_order_relaxed); }

extern "C" {
void* malloc(std::size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  count();
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(std::size_t align, std::size_t n) {
  count();
  return __libc_memalign(align, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) {
  count();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  count();
  void* p = __libc_memalign(align, n);
  if (!p && n) return ENOMEM;
  *out = p;
  return 0;
}
}
