#include <ctgrad/ops/matmul.hpp>
#include <ctgrad/ops/detail/gemm.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

namespace ctgrad {
namespace {

struct Dims {
  std::int64_t batch, M, N, K;
  bool ta, tb, shared_b;
  std::int64_t lda, ldb;  // leading dims of A and B as stored
};

Dims dims_of(const OpArgs& a) {
  const TensorRef &x = a.in[0], &y = a.in[1];
  Dims d;
  d.ta = a.attrs<MatmulOp>().trans_a;
  d.tb = a.attrs<MatmulOp>().trans_b;
  d.M = d.ta ? x.size(-1) : x.size(-2);
  d.K = d.ta ? x.size(-2) : x.size(-1);
  d.N = d.tb ? y.size(-2) : y.size(-1);
  d.batch = x.rows(2);
  d.shared_b = y.rank == 2;
  if (d.shared_b && !d.ta) {  // a weight shared by all rows: one GEMM over batch*M rows
    d.M *= d.batch;
    d.batch = 1;
  }
  d.lda = d.ta ? d.M : d.K;
  d.ldb = d.tb ? d.K : d.N;
  return d;
}

// f(p) for each batch entry: in parallel when entries are independent.
template <class F>
void over_batch(std::int64_t batch, F f) {
  kernel::parallel(batch, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t p = b; p < e; ++p) f(p);
  });
}

}  // namespace

template <class T>
void MatmulOp::forward(const OpArgs& a) {
  const Dims d = dims_of(a);
  const T *A = a.in[0].as<T>(), *B = a.in[1].as<T>();
  T* C = a.out.as<T>();
  const std::int64_t sb = d.shared_b ? 0 : d.K * d.N;
  over_batch(d.batch, [&](std::int64_t p) {
    kernel::gemm(d.ta, d.tb, d.M, d.N, d.K, A + p * d.M * d.K, d.lda, B + p * sb, d.ldb, C + p * d.M * d.N, d.N, false);
  });
}

// With C = op(A) op(B) and G = dC:  d op(A) = G op(B)^T,  d op(B) = op(A)^T G, written back in
// each operand's stored layout.
template <class T>
void MatmulOp::vjp(const OpArgs& a) {
  const Dims d = dims_of(a);
  const T *A = a.in[0].as<T>(), *B = a.in[1].as<T>(), *G = a.gout->as<T>();
  const std::int64_t sa = d.M * d.K, sb = d.shared_b ? 0 : d.K * d.N, sg = d.M * d.N;
  if (T* gA = a.gin[0].as<T>()) {
    over_batch(d.batch, [&](std::int64_t p) {
      const T *g = G + p * sg, *b = B + p * sb;
      T* ga = gA + p * sa;
      if (!d.ta)  // dA[M,K] += G[M,N] op(B)^T
        kernel::gemm(false, !d.tb, d.M, d.K, d.N, g, d.N, b, d.ldb, ga, d.K, !a.assign(0));
      else  // dA stored [K,M]: += op(B) G^T
        kernel::gemm(d.tb, true, d.K, d.M, d.N, b, d.ldb, g, d.N, ga, d.M, !a.assign(0));
    });
  }
  if (T* gB = a.gin[1].as<T>()) {
    auto one = [&](std::int64_t p) {
      const T *g = G + p * sg, *x = A + p * sa;
      T* gb = gB + p * sb;
      const bool acc = !a.assign(1) || (d.shared_b && p > 0);  // a shared dB: assigned by the first entry
      if (!d.tb)  // dB[K,N] += op(A)^T G
        kernel::gemm(!d.ta, false, d.K, d.N, d.M, x, d.lda, g, d.N, gb, d.N, acc);
      else  // dB stored [N,K]: += G^T op(A)
        kernel::gemm(true, d.ta, d.N, d.K, d.M, g, d.N, x, d.lda, gb, d.K, acc);
    };
    if (d.shared_b && d.batch == 0 && a.assign(1)) std::fill(gB, gB + d.K * d.N, T(0));  // no entry to write it
    if (d.shared_b)  // every batch entry adds to the same dB: in order
      for (std::int64_t p = 0; p < d.batch; ++p) one(p);
    else
      over_batch(d.batch, one);
  }
}

CTGRAD_INSTANTIATE_OP(MatmulOp)

}  // namespace ctgrad
