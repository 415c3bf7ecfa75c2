#include <ctgrad/ops/detail/kernel.hpp>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

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

}  // namespace ctgrad::kernel
