// SIMD kernels with runtime dispatch. Each kernel is written once over xsimd batches and compiled
// per instruction set (SSE2, AVX2+FMA, AVX-512) in its own translation unit; the best set the CPU
// has is picked once, at first use, so one build runs on any x86-64 machine. CTGRAD_SIMD=sse2|avx2|
// avx512 forces one (for tests and benchmarks). The same function bodies, run on scalars, are the
// plain references the op-conformance harness checks against.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ctgrad::simd {

// Unary elementwise functions; p is a parameter (the exponent of pow, the factor of scale, the
// constant shift adds).
enum Unary : int { neg, exp, log, sqrt, rsqrt, tanh, sigmoid, silu, gelu, gelu_tanh, pow, relu, scale, relu_squared, softplus, shift, unary_count };
enum Binary : int { add, sub, mul, div, binary_count };

struct Table {
  const char* arch;
  // The gradient kernels add to gx, or with `assign` write it (the op's first gradient: gx may
  // hold garbage and is not read).
  // y[i] = f(x[i]); gx[i] += g[i] * f'(x[i], y[i])        (index 0: float, 1: double)
  void (*unary[unary_count][2])(const void* x, void* y, std::int64_t n, double p);
  void (*unary_vjp[unary_count][2])(const void* x, const void* y, const void* g, void* gx, std::int64_t n, double p, bool assign);
  // y[i] = a[i] op b[i], same shapes; y[i] = a[i] op b (b a scalar broadcast over a row)
  void (*binary[binary_count][2])(const void* a, const void* b, void* y, std::int64_t n);
  // One row: y = softmax(x) or log_softmax(x); returns nothing. lse[0] gets the log-sum-exp.
  void (*softmax_row[2])(const void* x, void* y, std::int64_t n, bool log, void* lse);
  double (*row_logsumexp[2])(const void* x, std::int64_t n);
  // One row: the sum, and the sum of squares around `mean` (for norms and variance).
  double (*row_sum[2])(const void* x, std::int64_t n);
  double (*row_sq_dev[2])(const void* x, std::int64_t n, double mean);
  double (*row_max[2])(const void* x, std::int64_t n);
  // gx[i] += alpha * g[i] * (other ? other[i] : 1)
  void (*axpy[2])(const void* g, const void* other, void* gx, std::int64_t n, double alpha, bool assign);
  // One row of the softmax vjp: gx += y * (g - sum(g y)); log_softmax: gx += g - exp(y) sum(g).
  // gx may be g (in place: attention's VJP).
  void (*softmax_vjp_row[2])(const void* y, const void* g, void* gx, std::int64_t n, bool log, bool assign);
  // One row of the norm vjp, dy = g * gamma: sums[0] = sum(dy), sums[1] = sum(dy * (x - mean));
  // then gx += inv * (dy - a) - c * (x - mean).
  void (*norm_vjp_sums[2])(const void* x, const void* g, const void* gamma, std::int64_t n, double mean, double* sums);
  void (*norm_vjp_apply[2])(const void* x, const void* g, const void* gamma, void* gx, std::int64_t n, double mean,
                            double inv, double a, double c, bool assign);
  // One row's terms of a norm's parameter gradients: ag += g * (x - mean) * inv; ab += g (ab may
  // be null).
  void (*norm_param_row[2])(const void* x, const void* g, std::int64_t n, double mean, double inv, void* ag, void* ab);
  // One row: y = (x - mean) * inv * gamma + beta  (beta may be null).
  void (*norm_row[2])(const void* x, void* y, std::int64_t n, double mean, double inv, const void* gamma, const void* beta);
  // One row of cross-entropy's gradient: gx = g exp(x - lse) - off (the target's -g (1 - eps) is
  // the caller's).
  void (*xent_grad_row[2])(const void* x, void* gx, std::int64_t n, double lse, double g, double off, bool assign);
  // dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols (attention's K^T and V^T).
  void (*transpose[2])(const void* src, std::int64_t lds, std::int64_t rows, std::int64_t cols, void* dst, std::int64_t ldd);
};

const Table& best();                    // the table every op uses
const Table* table(const std::string& arch);  // "scalar", "sse2", "avx2", "avx512"; null if the CPU lacks it
std::vector<std::string> available();   // the sets this CPU runs, best last

}  // namespace ctgrad::simd
