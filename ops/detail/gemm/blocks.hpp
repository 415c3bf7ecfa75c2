// How one GEMM is cut into blocks: from the shape and the machine's block count alone, never from
// the thread count, so that the bits are the same on any number of threads (OpenBLAS and oneDNN
// pick their kernels by block size).
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

namespace ctgrad::kernel::gemm_impl {

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
Split choose_split(std::int64_t M, std::int64_t N, std::int64_t K);

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

}  // namespace ctgrad::kernel::gemm_impl
