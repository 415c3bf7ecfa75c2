// OpenBLAS, loaded by path into its own symbol scope with one thread per call (oneTBB drives it,
// one call per block): the kernel of fp32 blocks oneDNN does not take, and of every double block.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

namespace ctgrad::kernel::gemm_impl {

enum : int { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };
using sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using dgemm_fn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double, double*,
                          int);


struct Blas {
  sgemm_fn sgemm = nullptr;
  dgemm_fn dgemm = nullptr;
  std::string name;

  Blas();
};
const Blas& blas();  // loaded on first use; a Blas without sgemm names why in `name`

// One block through cblas_?gemm, row-major.
template <class T>
void call(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t lda, const T* B,
          std::int64_t ldb, T* C, std::int64_t ldc, bool acc) {
  const int t_a = ta ? kTrans : kNoTrans, t_b = tb ? kTrans : kNoTrans;
  if constexpr (std::is_same_v<T, float>)
    blas().sgemm(kRowMajor, t_a, t_b, int(M), int(N), int(K), 1.0f, A, int(lda), B, int(ldb), acc ? 1.0f : 0.0f, C, int(ldc));
  else
    blas().dgemm(kRowMajor, t_a, t_b, int(M), int(N), int(K), 1.0, A, int(lda), B, int(ldb), acc ? 1.0 : 0.0, C, int(ldc));
}

}  // namespace ctgrad::kernel::gemm_impl
