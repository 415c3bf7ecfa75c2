#include <ctgrad/ops/detail/kernel.hpp>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

namespace ctgrad::kernel {

void parallel_chunks(std::int64_t n, std::int64_t grain, void (*chunk)(void*, std::int64_t, std::int64_t), void* context) {
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<std::int64_t>& r) { chunk(context, r.begin(), r.end()); }, tbb::simple_partitioner());
}

}  // namespace ctgrad::kernel
