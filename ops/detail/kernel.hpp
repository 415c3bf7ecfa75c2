// Internal helpers for op kernels (not installed for users' op declarations, but usable by
// custom-op kernels): parallel loops with thread-count-independent partitions, broadcasting.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <ctgrad/graph/op.hpp>

namespace ctgrad::kernel {

// Runs chunk(context, begin, end) over [0, n) in chunks of `grain` on the calling oneTBB arena
// (ops/detail/parallel.cpp): out of line, so that no header of ctgrad's pulls in oneTBB's.
void parallel_chunks(std::int64_t n, std::int64_t grain, void (*chunk)(void*, std::int64_t, std::int64_t), void* context);
// True while this thread runs a chunk of parallel_chunks (which thread that is depends on the
// scheduling): work that keeps per-thread state should not start there.
bool inside_parallel_chunk();

// f(begin, end) over [0, n) in chunks of `grain`; chunks never depend on the thread count.
template <class F>
void parallel(std::int64_t n, std::int64_t grain, F&& f) {
  if (n <= grain) {
    if (n > 0) f(std::int64_t(0), n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  parallel_chunks(n, grain, [](void* c, std::int64_t b, std::int64_t e) { (*static_cast<Fn*>(c))(b, e); },
                  const_cast<void*>(static_cast<const void*>(&f)));
}

// A buffer for one op's work, leased from a process-wide pool (ops/detail/parallel.cpp) and given
// back when this ends: split-K partial products, per-block column sums. Every buffer grows to the
// largest size asked for (a free one at once, one in use when it comes back), and there are two
// per CPU to start with (a thread waiting inside an op may run another op's task that takes one),
// so once the sizes are seen a step allocates nothing, whichever thread asks and however calls
// nest while threads wait.
class PooledScratch {
 public:
  explicit PooledScratch(std::size_t bytes);
  ~PooledScratch();
  PooledScratch(const PooledScratch&) = delete;
  PooledScratch& operator=(const PooledScratch&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  void* buffer_;  // the pool's record
  void* data_;
};

// Sums down the rows of [rows, width] data, the same bits on any thread count: the rows are cut
// into blocks by the shape alone (sum_blocks); row(r, acc) runs for each row of a block in order
// and adds that row's terms to the block's partial sums acc[n_sums][width] (zeroed first); then
// out[s] (+)= the blocks' partials added in block order (written, not added to, when bit s of
// `assign` is set; a null out[s] is skipped). row may do the row's other work too (a norm's
// input gradient): the rows' data is then read once.
std::int64_t sum_blocks(std::int64_t rows, std::int64_t width);
template <class T>
void add_block_sums(const T* partial, std::int64_t blocks, std::int64_t width, int n_sums, T* const* out, unsigned assign);

template <class T, class Row>
void rows_with_column_sums(std::int64_t rows, std::int64_t width, int n_sums, T* const* out, unsigned assign, Row&& row) {
  const std::int64_t blocks = sum_blocks(rows, width), stride = width * n_sums;
  PooledScratch scratch(std::size_t(blocks * stride) * sizeof(T));
  T* partial = scratch.as<T>();
  parallel(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      T* acc = partial + b * stride;
      std::fill(acc, acc + stride, T(0));
      for (std::int64_t r = b * rows / blocks; r < (b + 1) * rows / blocks; ++r) row(r, acc);
    }
  });
  add_block_sums(partial, blocks, width, n_sums, out, assign);
}

// Grain for elementwise work of `cost` flops per element: about 32k flops per task.
inline std::int64_t grain_for(std::int64_t cost = 1) { return std::max<std::int64_t>(1, 32768 / cost); }

// Strides of `t` broadcast to the rank-r shape `out` (0 where t has 1 or no dim).
inline std::array<std::int64_t, kMaxRank> broadcast_strides(const TensorRef& t, const TensorRef& out) {
  std::array<std::int64_t, kMaxRank> st{};
  std::int64_t s = 1;
  for (int i = out.rank - 1; i >= 0; --i) {
    int ti = t.rank - out.rank + i;
    std::int64_t d = ti >= 0 ? t.dim[static_cast<std::size_t>(ti)] : 1;
    st[static_cast<std::size_t>(i)] = d == 1 ? 0 : s;
    s *= d;
  }
  return st;
}

// Offset in a broadcast operand of the output element with flat index `flat`.
inline std::int64_t offset_of(std::int64_t flat, const TensorRef& out, const std::array<std::int64_t, kMaxRank>& st) {
  std::int64_t off = 0;
  for (int i = out.rank - 1; i >= 0; --i) {
    std::int64_t d = out.dim[static_cast<std::size_t>(i)];
    off += (flat % d) * st[static_cast<std::size_t>(i)];
    flat /= d;
  }
  return off;
}

inline bool same_dims(const TensorRef& a, const TensorRef& b) {
  return a.numel == b.numel && a.rank == b.rank && a.dim == b.dim;
}

// True when t broadcast to out is t repeated over leading rows (t = out's trailing dims).
inline bool is_suffix(const TensorRef& t, const TensorRef& out) {
  int i = 0;
  while (i < t.rank && t.dim[static_cast<std::size_t>(i)] == 1) ++i;
  int k = t.rank - i;
  if (k > out.rank) return false;
  for (int j = 0; j < k; ++j)
    if (t.dim[static_cast<std::size_t>(i + j)] != out.dim[static_cast<std::size_t>(out.rank - k + j)]) return false;
  return true;
}

// When t broadcast to out repeats each of its elements over `inner` consecutive output elements
// (t is out with trailing dims set to 1: a per-row scale such as a gate [N, k, 1] on [N, k, d]),
// that count; else 0 (and 1 for equal shapes).
inline std::int64_t row_broadcast(const TensorRef& t, const TensorRef& out) {
  if (t.numel <= 0 || out.numel % t.numel) return 0;
  std::int64_t inner = 1;
  int i = out.rank - 1;
  for (; i >= 0; --i) {  // the trailing dims t has as 1
    const int ti = t.rank - out.rank + i;
    if ((ti >= 0 ? t.dim[static_cast<std::size_t>(ti)] : 1) != 1) break;
    inner *= out.dim[static_cast<std::size_t>(i)];
  }
  for (; i >= 0; --i) {  // the leading dims t has in full
    const int ti = t.rank - out.rank + i;
    if ((ti >= 0 ? t.dim[static_cast<std::size_t>(ti)] : 1) != out.dim[static_cast<std::size_t>(i)]) return 0;
  }
  return t.numel * inner == out.numel ? inner : 0;
}

// target[t] += sum over the broadcast dims of f(out_flat_index), for target broadcast to `out`
// (assign: target[t] = that sum).
// Each target element is summed in a fixed order by one task: deterministic for any thread count.
template <class T, class F>
void reduce_broadcast(const TensorRef& target, const TensorRef& out, F&& f, bool assign = false) {
  T* dst = target.as<T>();
  if (same_dims(target, out)) {
    parallel(out.numel, grain_for(), [&](std::int64_t b, std::int64_t e) {
      if (assign)
        for (std::int64_t i = b; i < e; ++i) dst[i] = f(i);
      else
        for (std::int64_t i = b; i < e; ++i) dst[i] += f(i);
    });
    return;
  }
  if (is_suffix(target, out)) {  // e.g. a bias: sum over leading rows, column blocks in parallel
    const std::int64_t inner = target.numel, rows = out.numel / inner;
    parallel(inner, 64, [&](std::int64_t b, std::int64_t e) {
      T acc[64] = {};
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = b; j < e; ++j) acc[j - b] += f(r * inner + j);
      for (std::int64_t j = b; j < e; ++j) dst[j] = assign ? acc[j - b] : dst[j] + acc[j - b];
    });
    return;
  }
  if (const std::int64_t inner = row_broadcast(target, out); inner > 1) {  // row sums, each in order
    parallel(target.numel, std::max<std::int64_t>(1, grain_for(inner)), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t t = b; t < e; ++t) {
        T acc = 0;
        for (std::int64_t j = 0; j < inner; ++j) acc += f(t * inner + j);
        dst[t] = assign ? acc : dst[t] + acc;
      }
    });
    return;
  }
  // General: walk the reduced sub-space of each target element.
  auto st = broadcast_strides(target, out);
  std::array<std::int64_t, kMaxRank> ost{};
  std::int64_t s = 1;
  for (int i = out.rank - 1; i >= 0; --i) ost[static_cast<std::size_t>(i)] = s, s *= out.dim[static_cast<std::size_t>(i)];
  int red[kMaxRank], nred = 0;
  std::int64_t red_count = 1;
  for (int i = 0; i < out.rank; ++i)
    if (st[static_cast<std::size_t>(i)] == 0 && out.dim[static_cast<std::size_t>(i)] > 1) {
      red[nred++] = i;
      red_count *= out.dim[static_cast<std::size_t>(i)];
    }
  parallel(target.numel, std::max<std::int64_t>(1, grain_for(red_count)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      // Output offset of the first element: decode t over the kept dims.
      std::int64_t base = 0, rem = t;
      for (int i = out.rank - 1; i >= 0; --i) {
        auto iu = static_cast<std::size_t>(i);
        if (st[iu] == 0) continue;
        std::int64_t d = out.dim[iu];
        base += (rem % d) * ost[iu];
        rem /= d;
      }
      T acc = 0;
      for (std::int64_t r = 0; r < red_count; ++r) {
        std::int64_t off = base, q = r;
        for (int k = nred - 1; k >= 0; --k) {
          auto iu = static_cast<std::size_t>(red[k]);
          off += (q % out.dim[iu]) * ost[iu];
          q /= out.dim[iu];
        }
        acc += f(off);
      }
      dst[t] = assign ? acc : dst[t] + acc;
    }
  });
}

// dst (+)= src permuted: output axis i is source axis perm[i]. Rows of the output's last axis.
template <class T, bool Accumulate>
void permute_copy(const T* src, T* dst, const TensorRef& sref, const std::array<int, kMaxRank>& perm) {
  const int rank = sref.rank;
  std::array<std::int64_t, kMaxRank> sstride{}, od{}, os{};
  std::int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) sstride[std::size_t(i)] = s, s *= sref.dim[std::size_t(i)];
  for (int i = 0; i < rank; ++i) od[std::size_t(i)] = sref.dim[std::size_t(perm[std::size_t(i)])], os[std::size_t(i)] = sstride[std::size_t(perm[std::size_t(i)])];
  const std::int64_t inner = rank ? od[std::size_t(rank - 1)] : 1, istride = rank ? os[std::size_t(rank - 1)] : 1;
  const std::int64_t rows = sref.numel / std::max<std::int64_t>(1, inner);
  parallel(rows, std::max<std::int64_t>(1, grain_for() / std::max<std::int64_t>(1, inner)),
                   [&](std::int64_t r0, std::int64_t r1) {
                     for (std::int64_t r = r0; r < r1; ++r) {
                       std::int64_t off = 0, q = r;
                       for (int i = rank - 2; i >= 0; --i) {
                         off += (q % od[std::size_t(i)]) * os[std::size_t(i)];
                         q /= od[std::size_t(i)];
                       }
                       T* d = dst + r * inner;
                       for (std::int64_t j = 0; j < inner; ++j) {
                         if constexpr (Accumulate) d[j] += src[off + j * istride];
                         else d[j] = src[off + j * istride];
                       }
                     }
                   });
}

}  // namespace ctgrad::kernel

// Explicit instantiation of an op's kernels for float and double, in the op's .cpp.
#define CTGRAD_INSTANTIATE_OP(Op)                   \
  template void Op::forward<float>(const OpArgs&);  \
  template void Op::forward<double>(const OpArgs&); \
  template void Op::vjp<float>(const OpArgs&);      \
  template void Op::vjp<double>(const OpArgs&);
