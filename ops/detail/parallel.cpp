#include <ctgrad/ops/detail/kernel.hpp>

#include <ctgrad/ops/detail/simd.hpp>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>

#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace ctgrad::kernel {
namespace {
thread_local int t_chunks = 0;  // chunks of parallel_chunks this thread is running (nested)
}

void parallel_chunks(std::int64_t n, std::int64_t grain, void (*chunk)(void*, std::int64_t, std::int64_t), void* context) {
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      struct Count {
                        Count() { ++t_chunks; }
                        ~Count() { --t_chunks; }
                      } count;
                      chunk(context, r.begin(), r.end());
                    },
                    tbb::simple_partitioner());
}

bool inside_parallel_chunk() { return t_chunks > 0; }

namespace {
struct PoolBuffer {
  static constexpr std::align_val_t kAlign{64};
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, kAlign); }
  };
  std::unique_ptr<std::byte[], Free> data;
  std::size_t bytes = 0;
  void grow(std::size_t n) {
    if (n <= bytes) return;
    data.reset(static_cast<std::byte*>(::operator new[](n, kAlign)));
    bytes = n;
  }
};

class ScratchPool {
 public:
  static ScratchPool& get() {
    static auto* pool = new ScratchPool;  // never destroyed: ops may run until the process ends
    return *pool;
  }
  PoolBuffer* take(std::size_t n) {
    std::lock_guard lock(mutex_);
    if (buffers_.empty()) {
      const int start = std::max(4, 2 * tbb::info::default_concurrency());
      free_.reserve(256);
      for (int i = 0; i < start; ++i) add();
    }
    if (n > largest_) {
      for (PoolBuffer* b : free_) b->grow(n);
      largest_ = n;
    }
    if (free_.empty()) add();
    PoolBuffer* b = free_.back();
    b->grow(n);  // nothing, unless a growth failed before
    free_.pop_back();
    return b;
  }
  void give(PoolBuffer* b) noexcept {
    std::lock_guard lock(mutex_);
    try {
      b->grow(largest_);  // if the pool grew while it was in use: now, in the step that grew it
    } catch (const std::bad_alloc&) {  // take() grows it when it is next handed out
    }
    free_.push_back(b);
  }

 private:
  void add() {
    buffers_.push_back(std::make_unique<PoolBuffer>());
    buffers_.back()->grow(largest_);
    free_.push_back(buffers_.back().get());
  }
  std::mutex mutex_;
  std::vector<std::unique_ptr<PoolBuffer>> buffers_;
  std::vector<PoolBuffer*> free_;
  std::size_t largest_ = 0;
};
}  // namespace

PooledScratch::PooledScratch(std::size_t bytes) {
  auto* b = ScratchPool::get().take(std::max<std::size_t>(bytes, 64));
  buffer_ = b;
  data_ = b->data.get();
}
PooledScratch::~PooledScratch() { ScratchPool::get().give(static_cast<PoolBuffer*>(buffer_)); }

std::int64_t sum_blocks(std::int64_t rows, std::int64_t width) {
  // About 4k elements a block (a task's worth of a norm's row work), at most 64 blocks and one
  // row a block.
  return std::max<std::int64_t>(1, std::min({rows, std::int64_t(64), rows * width / 4096}));
}

template <class T>
void add_block_sums(const T* partial, std::int64_t blocks, std::int64_t width, int n_sums, T* const* out, unsigned assign) {
  const auto add = simd::best().axpy[std::is_same_v<T, double>];  // o += 1 * p: exact, as o += p
  parallel(width, 1024, [&](std::int64_t c0, std::int64_t c1) {
    for (int s = 0; s < n_sums; ++s) {
      if (!out[s]) continue;
      for (std::int64_t b = 0; b < blocks; ++b)
        add(partial + (b * n_sums + s) * width + c0, nullptr, out[s] + c0, c1 - c0, 1.0, b == 0 && (assign >> s & 1u));
    }
  });
}
template void add_block_sums<float>(const float*, std::int64_t, std::int64_t, int, float* const*, unsigned);
template void add_block_sums<double>(const double*, std::int64_t, std::int64_t, int, double* const*, unsigned);

}  // namespace ctgrad::kernel
