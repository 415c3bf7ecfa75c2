// The kernels behind ops/detail/simd.hpp, written once over a value type V that is either an
// xsimd batch or a plain scalar. Included by one translation unit per instruction set, each of
// which defines CTGRAD_SIMD_ISA first: every function here then lives in a namespace of that
// unit's own, so the linker can never pick an AVX-512 copy of a helper for the SSE2 or scalar
// table (the units are also built with -O3 whatever the build type, so xsimd's inline helpers are inlined).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <ctgrad/ops/detail/simd.hpp>

#ifndef CTGRAD_SIMD_ISA
#error "define CTGRAD_SIMD_ISA (a namespace name) before including simd_kernels.hpp"
#endif

namespace ctgrad::simd::CTGRAD_SIMD_ISA {

// select() for batches and for scalars alike.
template <class C, class V>
inline V pick(const C& cond, const V& a, const V& b) {
  if constexpr (std::is_same_v<C, bool>)
    return cond ? a : b;
  else
    return xsimd::select(cond, a, b);
}

// erf in float (GELU): xsimd's branches on the range and runs at about 1 Gelem/s a core on mixed
// inputs (exp: 2), so float takes a rational approximation, one polynomial quotient, no exp;
// double keeps xsimd's (the gradient checks' path). (xsimd's tanh, same kind, stays: on small
// inputs its polynomial branch is faster than a rational tanh, and GPT-2's GELU VJP, 1 - tanh^2,
// would magnify a rational tanh's error 50x; docs/performance.md.)
template <class V> struct element { using type = V; };
template <class T, class A> struct element<xsimd::batch<T, A>> { using type = T; };
template <class V> constexpr bool is_float = std::is_same_v<typename element<V>::type, float>;

// 1 / d without a division (a division is much of such a function's time): the CPU's approximate
// reciprocal and one Newton step (rcp14: 2^-14, then about 1 ulp; SSE's rcp 2^-12, then 2^-23).
// Scalars and double divide. d must be finite and nonzero.
template <class V> V refined_reciprocal(V d) {
  if constexpr (std::is_arithmetic_v<V> || !is_float<V>) {
    return V(1) / d;
  } else {
    const V r = xsimd::reciprocal(d);
    return r * xsimd::fnma(d, r, V(2));
  }
}

// Eigen's generic_fast_erf_float: odd/even polynomials on [-4, 4] (erf is +-1 in float outside);
// 4.2e-7 at most from double erf, measured on [-6, 6] every 1e-5. Scalars divide exactly.
template <class V> V erf_float(V a) {
  const V x = xsimd::max(xsimd::min(a, V(4.f)), V(-4.f)), x2 = x * x;
  V p = V(-2.72614225801306e-10f);
  p = xsimd::fma(p, x2, V(2.77068142495902e-08f));
  p = xsimd::fma(p, x2, V(-2.10102402082508e-06f));
  p = xsimd::fma(p, x2, V(-5.69250639462346e-05f));
  p = xsimd::fma(p, x2, V(-7.34990630326855e-04f));
  p = xsimd::fma(p, x2, V(-2.95459980854025e-03f));
  p = xsimd::fma(p, x2, V(-1.60960333262415e-02f));
  V q = V(-1.45660718464996e-05f);
  q = xsimd::fma(q, x2, V(-2.13374055278905e-04f));
  q = xsimd::fma(q, x2, V(-1.68282697438203e-03f));
  q = xsimd::fma(q, x2, V(-7.37332916720468e-03f));
  q = xsimd::fma(q, x2, V(-1.42647390514189e-02f));
  // The quotient strays up to 2e-7 past +-1 near |x| = 4, and with the approximate reciprocal
  // its value at +-4 depends on the CPU: held to [-1, 1], and exactly +-1 from |x| = 4 on (so
  // GELU is exactly 0 far left, as with xsimd's erf). NaN stays NaN (the clamp would hide it).
  const V r = xsimd::max(xsimd::min(x * p * refined_reciprocal(q), V(1.f)), V(-1.f));
  return pick(xsimd::isnan(a), a, pick(xsimd::abs(a) >= V(4.f), pick(a < V(0.f), V(-1.f), V(1.f)), r));
}
template <class V> V erf_of(V x) {
  if constexpr (is_float<V>) return erf_float(x);
  else return xsimd::erf(x);
}

// Value f(x, p) and derivative d(x, y, p) of each unary function; V is a batch or a scalar.
template <int F>
struct Fn;
template <> struct Fn<neg> {
  template <class V> static V f(V x, V) { return -x; }
  template <class V> static V d(V, V, V) { return V(-1); }
};
template <> struct Fn<exp> {
  template <class V> static V f(V x, V) { return xsimd::exp(x); }
  template <class V> static V d(V, V y, V) { return y; }
};
template <> struct Fn<log> {
  template <class V> static V f(V x, V) { return xsimd::log(x); }
  template <class V> static V d(V x, V, V) { return V(1) / x; }
};
template <> struct Fn<sqrt> {
  template <class V> static V f(V x, V) { return xsimd::sqrt(x); }
  template <class V> static V d(V, V y, V) { return V(0.5) / y; }
};
template <> struct Fn<rsqrt> {
  template <class V> static V f(V x, V) { return V(1) / xsimd::sqrt(x); }
  template <class V> static V d(V, V y, V) { return V(-0.5) * y * y * y; }
};
template <> struct Fn<tanh> {
  template <class V> static V f(V x, V) { return xsimd::tanh(x); }
  template <class V> static V d(V, V y, V) { return V(1) - y * y; }
};
template <> struct Fn<sigmoid> {
  template <class V> static V f(V x, V) { return V(1) / (V(1) + xsimd::exp(-x)); }
  template <class V> static V d(V, V y, V) { return y * (V(1) - y); }
};
template <> struct Fn<silu> {
  template <class V> static V f(V x, V) { return x / (V(1) + xsimd::exp(-x)); }
  template <class V> static V d(V x, V, V) {
    const V s = V(1) / (V(1) + xsimd::exp(-x));
    return s * (V(1) + x * (V(1) - s));
  }
};
// GELU's derivative in float, Phi(x) + x phi(x), with one exp: Phi through erfc's form of
// Abramowitz & Stegun 7.1.26 (erf within 1.5e-7), 0.5 erfc(|u|) = 0.5 t P(t) e^(-u^2) with
// u = x / sqrt(2), whose e^(-u^2) is phi's exponential too (the rational erf and a second exp
// took half again the time). x is held to [-15, 15], where e^(-u^2) is 0 in float: +-inf get 1 and 0.
template <class V> V gelu_derivative_float(V x) {
  const V xc = xsimd::max(xsimd::min(x, V(15.f)), V(-15.f)), u = xc * V(0.7071067811865476f);
  const V e = xsimd::exp(-(u * u)), t = refined_reciprocal(V(1.f) + V(0.3275911f) * xsimd::abs(u));
  V p = V(1.061405429f);
  p = xsimd::fma(p, t, V(-1.453152027f));
  p = xsimd::fma(p, t, V(1.421413741f));
  p = xsimd::fma(p, t, V(-0.284496736f));
  p = xsimd::fma(p, t, V(0.254829592f));
  const V q = V(0.5f) * t * p * e;  // Phi(-|x|)
  const V d = pick(x < V(0.f), q, V(1.f) - q) + xc * V(0.3989422804014327f) * e;
  return pick(xsimd::isnan(x), x, d);  // (x != x is an ordered compare on AVX: false for NaN)
}

template <> struct Fn<gelu> {  // x Phi(x)
  template <class V> static V f(V x, V) { return V(0.5) * x * (V(1) + erf_of(x * V(0.7071067811865476))); }
  template <class V> static V d(V x, V, V) {
    if constexpr (is_float<V>) return gelu_derivative_float(x);
    else return V(0.5) * (V(1) + erf_of(x * V(0.7071067811865476))) + x * V(0.3989422804014327) * xsimd::exp(V(-0.5) * x * x);
  }
};
template <> struct Fn<gelu_tanh> {  // GPT-2's approximation
  template <class V> static V f(V x, V) {
    return V(0.5) * x * (V(1) + xsimd::tanh(V(0.7978845608028654) * (x + V(0.044715) * x * x * x)));
  }
  template <class V> static V d(V x, V, V) {
    const V t = xsimd::tanh(V(0.7978845608028654) * (x + V(0.044715) * x * x * x));
    // From |x| = 10 on, 1 - t^2 is exactly 0 in float and double: x held there keeps x^2 (inf
    // from 1.8e19 in float) from making that 0 * inf = NaN.
    const V xc = xsimd::max(xsimd::min(x, V(10)), V(-10));
    const V du = V(0.7978845608028654) * (V(1) + V(3 * 0.044715) * xc * xc);
    return V(0.5) * (V(1) + t) + V(0.5) * xc * (V(1) - t * t) * du;
  }
};
template <> struct Fn<pow> {
  // xsimd's batch pow gives 0 at x = 0 for every exponent; std::pow gives 1 for p = 0 and inf for
  // p < 0. Match std::pow, so that a lane and the scalar tail agree.
  template <class V> static V at_zero(V p) {
    return pick(p == V(0), V(1), pick(p < V(0), V(std::numeric_limits<double>::infinity()), V(0)));
  }
  template <class V> static V f(V x, V p) { return pick(x == V(0), at_zero(p), V(xsimd::pow(x, p))); }
  template <class V> static V d(V x, V, V p) {
    return pick(p == V(0), V(0), p * pick(x == V(0), at_zero(p - V(1)), V(xsimd::pow(x, p - V(1)))));
  }
};
template <> struct Fn<relu> {
  template <class V> static V f(V x, V) { return xsimd::max(x, V(0)); }
  template <class V> static V d(V, V y, V) { return pick(y > V(0), V(1), V(0)); }
};
template <> struct Fn<scale> {
  template <class V> static V f(V x, V p) { return p * x; }
  template <class V> static V d(V, V, V p) { return p; }
};
template <> struct Fn<shift> {  // x + p
  template <class V> static V f(V x, V p) { return x + p; }
  template <class V> static V d(V, V, V) { return V(1); }
};
template <> struct Fn<relu_squared> {  // max(x, 0)^2 (So et al. 2021, Primer)
  template <class V> static V f(V x, V) {
    const V r = xsimd::max(x, V(0));
    return r * r;
  }
  template <class V> static V d(V x, V, V) { return V(2) * xsimd::max(x, V(0)); }
};

template <> struct Fn<softplus> {  // log(1 + e^x), as max(x, 0) + log1p(e^-|x|): no overflow for any x
  template <class V> static V f(V x, V) { return xsimd::max(x, V(0)) + xsimd::log1p(xsimd::exp(-xsimd::abs(x))); }
  template <class V> static V d(V x, V, V) { return V(1) / (V(1) + xsimd::exp(-x)); }  // sigmoid(x)
};

template <int Op>
struct BinFn;
template <> struct BinFn<add> { template <class V> static V f(V a, V b) { return a + b; } };
template <> struct BinFn<sub> { template <class V> static V f(V a, V b) { return a - b; } };
template <> struct BinFn<mul> { template <class V> static V f(V a, V b) { return a * b; } };
template <> struct BinFn<div> { template <class V> static V f(V a, V b) { return a / b; } };

// Arch = void means plain scalar loops (the reference).
template <class Arch, class T>
struct Kernels {
  static constexpr bool scalar = std::is_void_v<Arch>;
  using B = std::conditional_t<scalar, T, xsimd::batch<T, std::conditional_t<scalar, xsimd::sse2, Arch>>>;
  static constexpr std::int64_t W = scalar ? 1 : std::int64_t(sizeof(B) / sizeof(T));

  static B load(const T* p) {
    if constexpr (scalar) return *p;
    else return B::load_unaligned(p);
  }
  static void store(T* p, const B& v) {
    if constexpr (scalar) *p = v;
    else v.store_unaligned(p);
  }
  // A gradient's element: gx = v (assign: gx is garbage and never read) or gx += v.
  static void put(T* gx, const B& v, bool assign) { store(gx, assign ? v : load(gx) + v); }
  static void put1(T* gx, T v, bool assign) { *gx = assign ? v : *gx + v; }
  static T total(const B& v) {
    if constexpr (scalar) return v;
    else return xsimd::hadd(v);
  }

  template <int F>
  static void unary(const void* xv, void* yv, std::int64_t n, double p) {
    const T* x = static_cast<const T*>(xv);
    T* y = static_cast<T*>(yv);
    std::int64_t i = 0;
    for (; i + W <= n; i += W) store(y + i, Fn<F>::f(load(x + i), B(T(p))));
    for (; i < n; ++i) y[i] = Fn<F>::f(x[i], T(p));
  }
  template <int F>
  static void unary_vjp(const void* xv, const void* yv, const void* gv, void* gxv, std::int64_t n, double p, bool assign) {
    const T *x = static_cast<const T*>(xv), *y = static_cast<const T*>(yv), *g = static_cast<const T*>(gv);
    T* gx = static_cast<T*>(gxv);
    // x or y may be null when the function's derivative does not read it (see UnaryOp::saves).
    auto at = [&](const T* a, std::int64_t i) { return a ? load(a + i) : B(T(0)); };
    std::int64_t i = 0;
    for (; i + W <= n; i += W) put(gx + i, load(g + i) * Fn<F>::d(at(x, i), at(y, i), B(T(p))), assign);
    for (; i < n; ++i) put1(gx + i, g[i] * Fn<F>::d(x ? x[i] : T(0), y ? y[i] : T(0), T(p)), assign);
  }
  template <int Op>
  static void binary(const void* av, const void* bv, void* yv, std::int64_t n) {
    const T *a = static_cast<const T*>(av), *b = static_cast<const T*>(bv);
    T* y = static_cast<T*>(yv);
    std::int64_t i = 0;
    for (; i + W <= n; i += W) store(y + i, BinFn<Op>::f(load(a + i), load(b + i)));
    for (; i < n; ++i) y[i] = BinFn<Op>::f(a[i], b[i]);
  }
  static T row_max(const T* x, std::int64_t n) {
    std::int64_t i = 0;
    T m = -std::numeric_limits<T>::infinity();
    if constexpr (!scalar) {
      if (n >= W) {
        B bm = load(x);
        for (i = W; i + W <= n; i += W) bm = xsimd::max(bm, load(x + i));
        alignas(64) T lanes[W];
        bm.store_aligned(lanes);
        for (std::int64_t l = 0; l < W; ++l) m = std::max(m, lanes[l]);
      }
    }
    for (; i < n; ++i) m = std::max(m, x[i]);
    return m;
  }
  static void softmax_row(const void* xv, void* yv, std::int64_t n, bool log, void* lse_out) {
    const T* x = static_cast<const T*>(xv);
    T* y = static_cast<T*>(yv);
    const T m = row_max(x, n);
    B acc(T(0));
    std::int64_t i = 0;
    for (; i + W <= n; i += W) {
      const B e = xsimd::exp(load(x + i) - B(m));
      if (!log) store(y + i, e);
      acc += e;
    }
    T s = total(acc);
    for (; i < n; ++i) {
      const T e = std::exp(x[i] - m);
      if (!log) y[i] = e;
      s += e;
    }
    const T lse = m + std::log(s);
    if (lse_out) *static_cast<T*>(lse_out) = lse;
    if (log) {
      for (i = 0; i + W <= n; i += W) store(y + i, load(x + i) - B(lse));
      for (; i < n; ++i) y[i] = x[i] - lse;
    } else {
      const T inv = T(1) / s;
      for (i = 0; i + W <= n; i += W) store(y + i, load(y + i) * B(inv));
      for (; i < n; ++i) y[i] *= inv;
    }
  }
  static double row_logsumexp(const void* xv, std::int64_t n) {
    const T* x = static_cast<const T*>(xv);
    const T m = row_max(x, n);
    B acc(T(0));
    std::int64_t i = 0;
    for (; i + W <= n; i += W) acc += xsimd::exp(load(x + i) - B(m));
    T s = total(acc);
    for (; i < n; ++i) s += std::exp(x[i] - m);
    return double(m + std::log(s));
  }
  static double row_max_erased(const void* xv, std::int64_t n) { return double(row_max(static_cast<const T*>(xv), n)); }
  static void axpy(const void* gv, const void* ov, void* gxv, std::int64_t n, double alpha, bool assign) {
    const T *g = static_cast<const T*>(gv), *o = static_cast<const T*>(ov);
    T* gx = static_cast<T*>(gxv);
    const B al = B(T(alpha));
    std::int64_t i = 0;
    if (o) {
      for (; i + W <= n; i += W) put(gx + i, al * load(g + i) * load(o + i), assign);
      for (; i < n; ++i) put1(gx + i, T(alpha) * g[i] * o[i], assign);
    } else {
      for (; i + W <= n; i += W) put(gx + i, al * load(g + i), assign);
      for (; i < n; ++i) put1(gx + i, T(alpha) * g[i], assign);
    }
  }
  static void softmax_vjp_row(const void* yv, const void* gv, void* gxv, std::int64_t n, bool log, bool assign) {
    const T *y = static_cast<const T*>(yv), *g = static_cast<const T*>(gv);
    T* gx = static_cast<T*>(gxv);
    B acc(T(0));
    std::int64_t i = 0;
    for (; i + W <= n; i += W) acc += log ? load(g + i) : load(g + i) * load(y + i);
    T s = total(acc);
    for (; i < n; ++i) s += log ? g[i] : g[i] * y[i];
    const B sb = B(s);
    for (i = 0; i + W <= n; i += W) {
      const B yi = load(y + i), gi = load(g + i);
      put(gx + i, log ? gi - xsimd::exp(yi) * sb : yi * (gi - sb), assign);
    }
    for (; i < n; ++i) put1(gx + i, log ? g[i] - std::exp(y[i]) * s : y[i] * (g[i] - s), assign);
  }
  static void xent_grad_row(const void* xv, void* gxv, std::int64_t n, double lse, double g, double off, bool assign) {
    const T* x = static_cast<const T*>(xv);
    T* gx = static_cast<T*>(gxv);
    const T l = T(lse), gs = T(g), o = T(off);
    std::int64_t i = 0;
    for (; i + W <= n; i += W) put(gx + i, B(gs) * xsimd::exp(load(x + i) - B(l)) - B(o), assign);
    for (; i < n; ++i) put1(gx + i, gs * std::exp(x[i] - l) - o, assign);
  }
  static void norm_vjp_sums(const void* xv, const void* gv, const void* gmv, std::int64_t n, double mean, double* sums) {
    const T *x = static_cast<const T*>(xv), *g = static_cast<const T*>(gv), *gm = static_cast<const T*>(gmv);
    const B mb = B(T(mean));
    B a(T(0)), b(T(0));
    std::int64_t i = 0;
    for (; i + W <= n; i += W) {
      const B dy = load(g + i) * load(gm + i);
      a += dy;
      b += dy * (load(x + i) - mb);
    }
    T sa = total(a), sb = total(b);
    for (; i < n; ++i) {
      const T dy = g[i] * gm[i];
      sa += dy;
      sb += dy * (x[i] - T(mean));
    }
    sums[0] = double(sa), sums[1] = double(sb);
  }
  static void norm_vjp_apply(const void* xv, const void* gv, const void* gmv, void* gxv, std::int64_t n, double mean,
                             double inv, double a, double c, bool assign) {
    const T *x = static_cast<const T*>(xv), *g = static_cast<const T*>(gv), *gm = static_cast<const T*>(gmv);
    T* gx = static_cast<T*>(gxv);
    const B mb = B(T(mean)), ib = B(T(inv)), ab = B(T(a)), cb = B(T(c));
    std::int64_t i = 0;
    for (; i + W <= n; i += W)
      put(gx + i, ib * (load(g + i) * load(gm + i) - ab) - cb * (load(x + i) - mb), assign);
    for (; i < n; ++i) put1(gx + i, T(inv) * (g[i] * gm[i] - T(a)) - T(c) * (x[i] - T(mean)), assign);
  }
  static double row_sum(const void* xv, std::int64_t n) {
    const T* x = static_cast<const T*>(xv);
    B acc(T(0));
    std::int64_t i = 0;
    for (; i + W <= n; i += W) acc += load(x + i);
    T s = total(acc);
    for (; i < n; ++i) s += x[i];
    return double(s);
  }
  static double row_sq_dev(const void* xv, std::int64_t n, double mean) {
    const T* x = static_cast<const T*>(xv);
    const B mb = B(T(mean));
    B acc(T(0));
    std::int64_t i = 0;
    for (; i + W <= n; i += W) {
      const B d = load(x + i) - mb;
      acc += d * d;
    }
    T s = total(acc);
    for (; i < n; ++i) s += (x[i] - T(mean)) * (x[i] - T(mean));
    return double(s);
  }
  static void norm_param_row(const void* xv, const void* gv, std::int64_t n, double mean, double inv, void* agv, void* abv) {
    const T *x = static_cast<const T*>(xv), *g = static_cast<const T*>(gv);
    T *ag = static_cast<T*>(agv), *ab = static_cast<T*>(abv);
    const B mb = B(T(mean)), ib = B(T(inv));
    std::int64_t i = 0;
    for (; i + W <= n; i += W) {
      const B gi = load(g + i);
      store(ag + i, load(ag + i) + gi * ((load(x + i) - mb) * ib));
      if (ab) store(ab + i, load(ab + i) + gi);
    }
    for (; i < n; ++i) {
      ag[i] += g[i] * ((x[i] - T(mean)) * T(inv));
      if (ab) ab[i] += g[i];
    }
  }
  // dst[c * ldd + r] = src[r * lds + c], r < rows, c < cols: each destination row gathers W source
  // rows' elements at once (AVX2 and AVX-512 gathers; xsimd 8's gather of float is element-wise).
  static void transpose(const void* sv, std::int64_t lds, std::int64_t rows, std::int64_t cols, void* dv, std::int64_t ldd) {
    const T* s = static_cast<const T*>(sv);
    T* d = static_cast<T*>(dv);
    std::int64_t r = 0;
    constexpr bool avx512 = std::is_same_v<Arch, xsimd::avx512bw>, avx2 = std::is_same_v<Arch, xsimd::fma3<xsimd::avx2>>;
    if constexpr (avx512 || avx2) {
      if ((W - 1) * lds <= std::numeric_limits<std::int32_t>::max()) {
        alignas(64) std::int32_t off[16] = {};
        alignas(64) long long off64[8] = {};
        for (std::int64_t k = 0; k < W; ++k) {
          if constexpr (sizeof(T) == 4) off[k] = std::int32_t(k * lds);
          else off64[k] = k * lds;
        }
        for (; r + W <= rows; r += W) {
          const T* col = s + r * lds;
          // The rows' cache lines first, all at once: a gather that misses waits for its lines
          // one after another on AMD Zen (ViT's heads: the transpose was a quarter of attention).
          for (std::int64_t k = 0; k < W; ++k) {
            const char* row = reinterpret_cast<const char*>(col + k * lds);
            for (std::int64_t c = 0; c < cols; c += 64 / std::int64_t(sizeof(T))) _mm_prefetch(row + c * std::int64_t(sizeof(T)), _MM_HINT_T0);
            if (cols > 0) _mm_prefetch(row + (cols - 1) * std::int64_t(sizeof(T)), _MM_HINT_T0);  // a row starting mid-line ends in one more
          }
          for (std::int64_t c = 0; c < cols; ++c) {
            if constexpr (avx512 && std::is_same_v<T, float>)
              _mm512_storeu_ps(d + c * ldd + r, _mm512_i32gather_ps(_mm512_load_si512(off), col + c, 4));
            else if constexpr (avx512)
              _mm512_storeu_pd(d + c * ldd + r, _mm512_i64gather_pd(_mm512_load_si512(off64), col + c, 8));
            else if constexpr (std::is_same_v<T, float>)
              _mm256_storeu_ps(d + c * ldd + r, _mm256_i32gather_ps(col + c, _mm256_load_si256(reinterpret_cast<const __m256i*>(off)), 4));
            else
              _mm256_storeu_pd(d + c * ldd + r,
                               _mm256_i64gather_pd(col + c, _mm256_load_si256(reinterpret_cast<const __m256i*>(off64)), 8));
          }
        }
      }
    }
    for (; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) d[c * ldd + r] = s[r * lds + c];
  }
  static void norm_row(const void* xv, void* yv, std::int64_t n, double mean, double inv, const void* gv, const void* bv) {
    const T *x = static_cast<const T*>(xv), *gamma = static_cast<const T*>(gv), *beta = static_cast<const T*>(bv);
    T* y = static_cast<T*>(yv);
    const B mb = B(T(mean)), ib = B(T(inv));
    std::int64_t i = 0;
    for (; i + W <= n; i += W) {
      B v = (load(x + i) - mb) * ib * load(gamma + i);
      if (beta) v += load(beta + i);
      store(y + i, v);
    }
    for (; i < n; ++i) y[i] = (x[i] - T(mean)) * T(inv) * gamma[i] + (beta ? beta[i] : T(0));
  }
};

template <class Arch, class T, int... F>
void fill_unary(Table& t, int ti, std::integer_sequence<int, F...>) {
  ((t.unary[F][ti] = &Kernels<Arch, T>::template unary<F>, t.unary_vjp[F][ti] = &Kernels<Arch, T>::template unary_vjp<F>), ...);
}
template <class Arch, class T, int... Op>
void fill_binary(Table& t, int ti, std::integer_sequence<int, Op...>) {
  ((t.binary[Op][ti] = &Kernels<Arch, T>::template binary<Op>), ...);
}

template <class Arch>
Table make_table(const char* name) {
  Table t{};
  t.arch = name;
  auto one = [&](auto tag, int ti) {
    using T = decltype(tag);
    fill_unary<Arch, T>(t, ti, std::make_integer_sequence<int, unary_count>{});
    fill_binary<Arch, T>(t, ti, std::make_integer_sequence<int, binary_count>{});
    t.softmax_row[ti] = &Kernels<Arch, T>::softmax_row;
    t.row_sum[ti] = &Kernels<Arch, T>::row_sum;
    t.row_logsumexp[ti] = &Kernels<Arch, T>::row_logsumexp;
    t.row_max[ti] = &Kernels<Arch, T>::row_max_erased;
    t.axpy[ti] = &Kernels<Arch, T>::axpy;
    t.softmax_vjp_row[ti] = &Kernels<Arch, T>::softmax_vjp_row;
    t.xent_grad_row[ti] = &Kernels<Arch, T>::xent_grad_row;
    t.norm_vjp_sums[ti] = &Kernels<Arch, T>::norm_vjp_sums;
    t.norm_vjp_apply[ti] = &Kernels<Arch, T>::norm_vjp_apply;
    t.row_sq_dev[ti] = &Kernels<Arch, T>::row_sq_dev;
    t.norm_row[ti] = &Kernels<Arch, T>::norm_row;
    t.norm_param_row[ti] = &Kernels<Arch, T>::norm_param_row;
    t.transpose[ti] = &Kernels<Arch, T>::transpose;
  };
  one(float{}, 0);
  one(double{}, 1);
  return t;
}

}  // namespace ctgrad::simd::CTGRAD_SIMD_ISA
