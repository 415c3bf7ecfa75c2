#include <ctgrad/ops/matmul.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

namespace ctgrad {
namespace {

// C[i*N + j] (+)= sum_k A[i*ar + k*ac] * B[k*br + j*bc], rows of C in parallel.
// Reference kernel; issue #3 replaces it with a packed SIMD micro-kernel.
template <class T>
void gemm(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t ar, std::int64_t ac,
          const T* B, std::int64_t br, std::int64_t bc, T* C, bool accumulate) {
  const std::int64_t grain = std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(1, N * K));
  kernel::parallel(M, grain, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      T* c = C + i * N;
      if (!accumulate) std::fill(c, c + N, T(0));
      if (bc == 1) {  // rows of B contiguous: c += a_ik * B[k, :]
        for (std::int64_t k = 0; k < K; ++k) {
          const T a = A[i * ar + k * ac];
          const T* b = B + k * br;
          for (std::int64_t j = 0; j < N; ++j) c[j] += a * b[j];
        }
      } else if (ac == 1 && br == 1) {  // dot products over contiguous k
        const T* a = A + i * ar;
        for (std::int64_t j = 0; j < N; ++j) {
          const T* b = B + j * bc;
          T s = 0;
#pragma omp simd reduction(+ : s)
          for (std::int64_t k = 0; k < K; ++k) s += a[k] * b[k];
          c[j] += s;
        }
      } else {
        for (std::int64_t k = 0; k < K; ++k) {
          const T a = A[i * ar + k * ac];
          for (std::int64_t j = 0; j < N; ++j) c[j] += a * B[k * br + j * bc];
        }
      }
    }
  });
}

struct Dims {
  std::int64_t batch, M, N, K;
  bool ta, tb, shared_b;
};

Dims dims_of(const OpArgs& a) {
  const TensorRef &x = a.in[0], &y = a.in[1];
  Dims d;
  d.ta = a.attr.i[0] != 0;
  d.tb = a.attr.i[1] != 0;
  d.M = d.ta ? x.size(-1) : x.size(-2);
  d.K = d.ta ? x.size(-2) : x.size(-1);
  d.N = d.tb ? y.size(-2) : y.size(-1);
  d.batch = x.rows(2);
  d.shared_b = y.rank == 2;
  if (d.shared_b && !d.ta) {  // a weight shared by all rows: one GEMM over batch*M rows
    d.M *= d.batch;
    d.batch = 1;
  }
  return d;
}

}  // namespace

template <class T>
void MatmulOp::forward(const OpArgs& a) {
  const Dims d = dims_of(a);
  const T *A = a.in[0].as<T>(), *B = a.in[1].as<T>();
  T* C = a.out.as<T>();
  // Strides of A(i,k) and B(k,j) in their storage.
  const std::int64_t ar = d.ta ? 1 : d.K, ac = d.ta ? d.M : 1;
  const std::int64_t br = d.tb ? 1 : d.N, bc = d.tb ? d.K : 1;
  for (std::int64_t p = 0; p < d.batch; ++p)
    gemm(d.M, d.N, d.K, A + p * d.M * d.K, ar, ac, B + (d.shared_b ? 0 : p * d.K * d.N), br, bc,
         C + p * d.M * d.N, false);
}

template <class T>
void MatmulOp::vjp(const OpArgs& a) {
  const Dims d = dims_of(a);
  const T *A = a.in[0].as<T>(), *B = a.in[1].as<T>(), *G = a.gout->as<T>();
  const std::int64_t sa = d.M * d.K, sb = d.shared_b ? 0 : d.K * d.N, sg = d.M * d.N;
  const std::int64_t ar = d.ta ? 1 : d.K, ac = d.ta ? d.M : 1;
  const std::int64_t br = d.tb ? 1 : d.N, bc = d.tb ? d.K : 1;
  if (T* gA = a.gin[0].as<T>()) {
    for (std::int64_t p = 0; p < d.batch; ++p) {
      if (!d.ta)  // dA[i,k] += sum_j G[i,j] B(k,j)
        gemm(d.M, d.K, d.N, G + p * sg, d.N, 1, B + p * sb, bc, br, gA + p * sa, true);
      else  // dA stored [K,M]: dAs[k,i] += sum_j B(k,j) G[i,j]
        gemm(d.K, d.M, d.N, B + p * sb, br, bc, G + p * sg, 1, d.N, gA + p * sa, true);
    }
  }
  if (T* gB = a.gin[1].as<T>()) {
    // A shared B sums over the batch in a fixed order (serial over p).
    for (std::int64_t p = 0; p < d.batch; ++p) {
      if (!d.tb)  // dB[k,j] += sum_i A(i,k) G[i,j]
        gemm(d.K, d.N, d.M, A + p * sa, ac, ar, G + p * sg, d.N, 1, gB + p * sb, true);
      else  // dB stored [N,K]: dBs[j,k] += sum_i G[i,j] A(i,k)
        gemm(d.N, d.K, d.M, G + p * sg, 1, d.N, A + p * sa, ar, ac, gB + p * sb, true);
    }
  }
}

CTGRAD_INSTANTIATE_OP(MatmulOp)

}  // namespace ctgrad
