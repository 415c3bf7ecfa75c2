#include <ctgrad/ops/attention.hpp>
#include <ctgrad/graph/random.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace ctgrad {
namespace {

struct Geometry {
  std::int64_t heads, Tq, Tk, d, dv;  // heads = product of the leading dims
  double scale, p;
  bool causal;
  // Mask strides over (head index split into leading dims, query, key): 0 where broadcast.
  const TensorRef* mask = nullptr;
  std::array<std::int64_t, kMaxRank> mstride{};
  std::array<std::int64_t, kMaxRank> lead{};  // leading dims
  int n_lead = 0;
};

Geometry geometry(const OpArgs& a) {
  const TensorRef &q = a.in[0], &k = a.in[1], &v = a.in[2];
  Geometry g;
  g.Tq = q.size(-2), g.d = q.size(-1), g.Tk = k.size(-2), g.dv = v.size(-1);
  g.heads = q.rows(2);
  g.scale = a.attr.f[0] != 0 ? a.attr.f[0] : 1.0 / std::sqrt(double(g.d));
  g.p = a.training ? a.attr.f[1] : 0.0;
  g.causal = a.attr.i[0] != 0;
  g.n_lead = q.rank - 2;
  for (int i = 0; i < g.n_lead; ++i) g.lead[std::size_t(i)] = q.dim[std::size_t(i)];
  if (a.n_in == 4) {
    g.mask = &a.in[3];
    // Scores have dims lead..., Tq, Tk; the mask is right-aligned against them.
    std::array<std::int64_t, kMaxRank> sdim{};
    for (int i = 0; i < g.n_lead; ++i) sdim[std::size_t(i)] = g.lead[std::size_t(i)];
    sdim[std::size_t(g.n_lead)] = g.Tq, sdim[std::size_t(g.n_lead + 1)] = g.Tk;
    std::int64_t s = 1;
    const TensorRef& m = a.in[3];
    for (int i = q.rank - 1; i >= 0; --i) {
      const int mi = m.rank - q.rank + i;
      const std::int64_t md = mi >= 0 ? m.dim[std::size_t(mi)] : 1;
      g.mstride[std::size_t(i)] = md == 1 ? 0 : s;
      s *= md;
    }
  }
  return g;
}

// Offset of the mask row for (head h, query i); key j adds j * mstride[last].
std::int64_t mask_row(const Geometry& g, std::int64_t h, std::int64_t i) {
  std::int64_t off = 0, q = h;
  for (int l = g.n_lead - 1; l >= 0; --l) {
    off += (q % g.lead[std::size_t(l)]) * g.mstride[std::size_t(l)];
    q /= g.lead[std::size_t(l)];
  }
  return off + i * g.mstride[std::size_t(g.n_lead)];
}

template <class T>
bool kept(const Geometry& g, std::int64_t mrow, std::int64_t i, std::int64_t j) {
  if (g.causal && j > i + (g.Tk - g.Tq)) return false;
  if (!g.mask) return true;
  const std::int64_t off = mrow + j * g.mstride[std::size_t(g.n_lead + 1)];
  return g.mask->dtype == DType::index ? g.mask->as<std::int32_t>()[off] != 0 : g.mask->as<T>()[off] != T(0);
}

template <class T>
T dot(const T* a, const T* b, std::int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t t = 0; t < n; ++t) s += a[t] * b[t];
  return s;
}

// Dropout factor of probability (h, i, j): 0 or 1/(1-p).
template <class T>
T drop(const Geometry& g, std::uint64_t key, std::int64_t h, std::int64_t i, std::int64_t j) {
  if (g.p <= 0) return T(1);
  return random::uniform(key, std::uint64_t((h * g.Tq + i) * g.Tk + j)) >= g.p ? T(1.0 / (1.0 - g.p)) : T(0);
}

constexpr std::int64_t kBlock = 64;  // keys per block of scores held on the stack

}  // namespace

template <class T>
void AttentionOp::forward(const OpArgs& a) {
  const Geometry g = geometry(a);
  const T *Q = a.in[0].as<T>(), *K = a.in[1].as<T>(), *V = a.in[2].as<T>();
  T *O = a.out.as<T>(), *lse = a.scratch.as<T>();
  const std::uint64_t key = random::key(a.seed, a.step, std::uint64_t(a.node));
  kernel::parallel(g.heads * g.Tq, std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(1, g.Tk * g.d)),
                   [&](std::int64_t r0, std::int64_t r1) {
    T s[kBlock];
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t h = r / g.Tq, i = r % g.Tq, mrow = g.mask ? mask_row(g, h, i) : 0;
      const T* q = Q + r * g.d;
      T* o = O + r * g.dv;
      std::fill(o, o + g.dv, T(0));
      T m = -std::numeric_limits<T>::infinity(), l = 0;
      for (std::int64_t j0 = 0; j0 < g.Tk; j0 += kBlock) {
        const std::int64_t j1 = std::min(g.Tk, j0 + kBlock);
        T bm = -std::numeric_limits<T>::infinity();
        for (std::int64_t j = j0; j < j1; ++j) {
          s[j - j0] = kept<T>(g, mrow, i, j) ? T(g.scale) * dot(q, K + (h * g.Tk + j) * g.d, g.d)
                                            : -std::numeric_limits<T>::infinity();
          bm = std::max(bm, s[j - j0]);
        }
        if (bm == -std::numeric_limits<T>::infinity()) continue;  // all masked in this block
        const T m_new = std::max(m, bm), c = std::exp(m - m_new);  // rescale what was summed so far
        l *= c;
        for (std::int64_t t = 0; t < g.dv; ++t) o[t] *= c;
        for (std::int64_t j = j0; j < j1; ++j) {
          const T pj = std::exp(s[j - j0] - m_new);
          l += pj;
          const T w = pj * drop<T>(g, key, h, i, j);
          if (w == T(0)) continue;
          const T* vj = V + (h * g.Tk + j) * g.dv;
          for (std::int64_t t = 0; t < g.dv; ++t) o[t] += w * vj[t];
        }
        m = m_new;
      }
      if (l == T(0)) {  // every key masked: zeros, and an infinite lse makes every p zero in the vjp
        lse[r] = std::numeric_limits<T>::infinity();
        continue;
      }
      for (std::int64_t t = 0; t < g.dv; ++t) o[t] /= l;
      lse[r] = m + std::log(l);
    }
  });
}

template <class T>
void AttentionOp::vjp(const OpArgs& a) {
  const Geometry g = geometry(a);
  const T *Q = a.in[0].as<T>(), *K = a.in[1].as<T>(), *V = a.in[2].as<T>(), *O = a.out.as<T>(), *lse = a.scratch.as<T>();
  const T* G = a.gout->as<T>();
  T *gQ = a.gin[0].as<T>(), *gK = a.gin[1].as<T>(), *gV = a.gin[2].as<T>();
  const std::uint64_t key = random::key(a.seed, a.step, std::uint64_t(a.node));
  // Heads in parallel; within a head, query rows in order, so dK and dV add up deterministically.
  kernel::parallel(g.heads, 1, [&](std::int64_t h0, std::int64_t h1) {
    for (std::int64_t h = h0; h < h1; ++h) {
      for (std::int64_t i = 0; i < g.Tq; ++i) {
        const std::int64_t r = h * g.Tq + i, mrow = g.mask ? mask_row(g, h, i) : 0;
        if (lse[r] == std::numeric_limits<T>::infinity()) continue;  // fully masked row
        const T *q = Q + r * g.d, *dO = G + r * g.dv;
        const T Di = dot(dO, O + r * g.dv, g.dv);  // = sum_j p_ij dp_ij
        for (std::int64_t j = 0; j < g.Tk; ++j) {
          if (!kept<T>(g, mrow, i, j)) continue;
          const T* kj = K + (h * g.Tk + j) * g.d;
          const T* vj = V + (h * g.Tk + j) * g.dv;
          const T p = std::exp(T(g.scale) * dot(q, kj, g.d) - lse[r]);
          const T z = drop<T>(g, key, h, i, j);
          if (gV && z != T(0))
            for (std::int64_t t = 0; t < g.dv; ++t) gV[(h * g.Tk + j) * g.dv + t] += p * z * dO[t];
          const T ds = p * (z * dot(dO, vj, g.dv) - Di) * T(g.scale);
          if (ds == T(0)) continue;
          if (gQ)
            for (std::int64_t t = 0; t < g.d; ++t) gQ[r * g.d + t] += ds * kj[t];
          if (gK)
            for (std::int64_t t = 0; t < g.d; ++t) gK[(h * g.Tk + j) * g.d + t] += ds * q[t];
        }
      }
    }
  });
}

CTGRAD_INSTANTIATE_OP(AttentionOp)

}  // namespace ctgrad
