#include <ctgrad/ops/attention.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/ops/detail/gemm.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <limits>
#include <vector>

namespace ctgrad {
namespace {

// A tensor broadcast against the scores [lead..., Tq, Tk] (the mask, the bias): its strides over
// (leading dims, query, key), 0 where broadcast.
struct Broadcast {
  const TensorRef* t = nullptr;
  int in = -1;  // input position
  std::array<std::int64_t, kMaxRank> stride{};
};

struct Geometry {
  std::int64_t heads, Tq, Tk, d, dv;  // heads = product of the leading dims
  bool seq_first = false;             // q, k, v, out [B, T, H, width]: H heads per batch entry
  std::int64_t H = 1;
  bool packed = false;                // packed_qkv: q, k, v are slots 0, 1, 2 of one [B, T, 3, H, d] input
  // Distance between two rows of one head in q, k, v and out (and their gradients): the width, or
  // a token's stride when seq_first (H x width; 3 x H x d when packed).
  std::int64_t ld_q = 0, ld_k = 0, ld_v = 0, ld_o = 0;
  std::uint64_t first = 0;             // dropout counter of element 0 (a data-parallel shard's offset)
  double scale, p;
  bool causal;
  Broadcast mask, bias;
  std::array<std::int64_t, kMaxRank> lead{};  // leading dims
  int n_lead = 0;

  // Offset of row (head h, query i) of a broadcast tensor; key j adds j * stride[n_lead + 1].
  std::int64_t row(const Broadcast& m, std::int64_t h, std::int64_t i) const {
    std::int64_t off = 0, q = h;
    for (int l = n_lead - 1; l >= 0; --l) {
      off += (q % lead[std::size_t(l)]) * m.stride[std::size_t(l)];
      q /= lead[std::size_t(l)];
    }
    return off + i * m.stride[std::size_t(n_lead)];
  }
  std::int64_t key_stride(const Broadcast& m) const { return m.stride[std::size_t(n_lead + 1)]; }
  // Offset of row i (query or key) of head h in q, k, v, out or their gradients (T rows of
  // `width`, `ld` apart).
  std::int64_t at(std::int64_t h, std::int64_t i, std::int64_t T, std::int64_t width, std::int64_t ld) const {
    return seq_first ? (h / H * T + i) * ld + h % H * width : (h * T + i) * ld;
  }
};

// Rows [i0, i1) of head h set to zero.
template <class T>
void zero_rows(const Geometry& g, T* x, std::int64_t h, std::int64_t i0, std::int64_t i1, std::int64_t T_len, std::int64_t width,
               std::int64_t ld) {
  for (std::int64_t i = i0; i < i1; ++i) std::fill_n(x + g.at(h, i, T_len, width, ld), width, T(0));
}

Geometry geometry(const OpArgs& a) {
  const AttentionOptions o = a.attrs<AttentionOp>();
  Geometry g;
  g.seq_first = o.seq_first;
  g.packed = o.packed_qkv;
  const TensorRef& q = a.in[0];
  // q's dims as attention sees them ([B, T, H, d] when packed: the slot axis 2 left out).
  const int q_rank = g.packed ? 4 : q.rank;
  auto q_dim = [&](int i) { return g.packed && i >= 2 ? q.size(i + 1) : q.size(i); };
  const TensorRef &k = g.packed ? q : a.in[1], &v = g.packed ? q : a.in[2];
  const int len_axis = o.seq_first ? 1 : q.rank - 2;
  g.Tq = q.size(len_axis), g.d = q.size(-1), g.Tk = k.size(len_axis), g.dv = v.size(-1);
  g.heads = o.seq_first ? q_dim(0) * q_dim(2) : q.rows(2);
  if (o.seq_first) g.H = q_dim(2);
  g.ld_q = g.ld_k = o.seq_first ? g.H * g.d : g.d;
  g.ld_v = g.ld_o = o.seq_first ? g.H * g.dv : g.dv;
  if (g.packed) g.ld_q = g.ld_k = g.ld_v = 3 * g.H * g.d;
  g.first = a.shard * std::uint64_t(g.heads * g.Tq * g.Tk);
  g.scale = o.scale != 0 ? double(o.scale) : 1.0 / std::sqrt(double(g.d));
  g.p = a.training ? double(o.dropout) : 0.0;
  g.causal = o.causal;
  g.n_lead = q_rank - 2;  // the scores' leading dims: [B, H] when seq_first
  for (int i = 0; i < g.n_lead; ++i) g.lead[std::size_t(i)] = q_dim(o.seq_first && i == 1 ? 2 : i);
  for (int in = g.packed ? 1 : 3; in < a.n_in; ++in) {
    Broadcast& b = a.in[in].dtype == DType::index ? g.mask : g.bias;
    b.t = &a.in[in];
    b.in = in;
    // Right-aligned against the scores' dims lead..., Tq, Tk.
    std::int64_t s = 1;
    const TensorRef& m = a.in[in];
    for (int i = q_rank - 1; i >= 0; --i) {
      const int mi = m.rank - q_rank + i;
      const std::int64_t md = mi >= 0 ? m.dim[std::size_t(mi)] : 1;
      b.stride[std::size_t(i)] = md == 1 ? 0 : s;
      s *= md;
    }
  }
  return g;
}

// q, k, v (or their gradients; null where none flows): three inputs, or the slots of one when packed.
template <class T>
struct Operands {
  T *q, *k, *v;
};
template <class T>
Operands<T> operands(const Geometry& g, const TensorRef* t) {
  using U = std::remove_const_t<T>;
  if (!g.packed) return {t[0].as<U>(), t[1].as<U>(), t[2].as<U>()};
  T* base = t[0].as<U>();
  if (!base) return {nullptr, nullptr, nullptr};
  return {base, base + g.H * g.d, base + 2 * g.H * g.d};
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
  return random::uniform(key, g.first + std::uint64_t((h * g.Tq + i) * g.Tk + j)) >= g.p ? T(1.0 / (1.0 - g.p)) : T(0);
}

// Work space of one task on its stack (no heap in a step, whichever thread runs it): a block of
// queries holds its scores over all the keys it can see, so blocks have up to 64 queries and at
// most 64 KB of scores. Over that many keys a block is one query and a per-thread heap buffer.
// Each task runs isolated (see run_isolated), so a thread never holds two tasks' frames at once.
template <class T>
constexpr std::int64_t kWork = 65536 / sizeof(T);
template <class T>
std::int64_t query_block(const Geometry& g) {
  return std::clamp<std::int64_t>(kWork<T> / std::max<std::int64_t>(g.Tk, 1), 1, 64);
}

// A task's GEMMs may split and wait for their halves; while waiting, a thread must not start
// another attention task (it would reuse this thread's work space, and stack a second frame).
template <class F>
void run_isolated(F&& f) {
  tbb::this_task_arena::isolate(std::forward<F>(f));
}

// Keys a block of queries [i0, i1) can see: under the causal mask, up to the last query's diagonal.
std::int64_t keys_seen(const Geometry& g, std::int64_t i1) {
  return g.causal ? std::clamp<std::int64_t>(i1 + (g.Tk - g.Tq), 0, g.Tk) : g.Tk;
}

// A task's work space: `local` (on its stack) when n fits, else a per-thread heap buffer.
template <class T>
T* workspace(T* local, int which, std::size_t n) {
  if (n <= std::size_t(kWork<T>)) return local;
  thread_local std::vector<T> buf[3];
  std::vector<T>& b = buf[which];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// Keys (or values) of one head transposed, width x n (ld `ld`): Q K^T and dO V^T then run as
// plain products, which OpenBLAS's small-matrix kernels take (without packing) where a
// transposed operand sends short sequences through its packing path: 1.26-1.48x on those GEMMs
// alone (ViT's 50 x 50 x 32, GPT small's 64 x 64 x 32; docs/performance.md), gather included.
// Only when width x n fits kTransposedMax (32 KB on the task's stack); longer ones keep the
// transposed product, where packing pays. The rule depends on the block's shape alone, so the
// forward and the VJP compute a block's scores with the same kernel (the VJP's recomputed P is
// exact).
template <class T>
constexpr std::int64_t kTransposedMax = 32768 / sizeof(T);
template <class T>
struct Transposed {
  T* data;
  std::int64_t ld, width, done = 0;  // columns [0, done) hold keys [0, done)
  // Whether a block over n keys reads this copy (after extending it to n keys of `src`).
  bool cover(const T* src, std::int64_t ld_src, std::int64_t n) {
    if (width * n > kTransposedMax<T> || n > ld) return false;
    if (n > done) {
      constexpr int ti = std::is_same_v<T, double> ? 1 : 0;
      simd::best().transpose[ti](src + done * ld_src, ld_src, n - done, width, data + done, ld);
      done = n;
    }
    return true;
  }
};
template <class T>
Transposed<T> transposed(T* buf, std::int64_t width, std::int64_t Tk) {
  return {buf, std::min(Tk, kTransposedMax<T> / std::max<std::int64_t>(width, 1)), width};
}

// The probabilities of queries [i0, i1) of head h over keys [0, n) into P [rows, n]: the scaled
// scores S = Q K^T (one GEMM, on K^T's copy when `Kt` covers the block), masked, then softmax per
// row. Forward: lse is written; backward: lse is read and P = exp(S - lse), the forward's
// probabilities exactly recomputed.
template <class T>
void probabilities(const Geometry& g, const T* Q, const T* K, Transposed<T>& Kt, T* lse, bool recompute, std::int64_t h,
                   std::int64_t i0, std::int64_t i1, std::int64_t n, T* P) {
  constexpr int ti = std::is_same_v<T, double> ? 1 : 0;
  const simd::Table& t = simd::best();
  const std::int64_t rows = i1 - i0;
  const T* Kh = K + g.at(h, 0, g.Tk, g.d, g.ld_k);
  if (Kt.cover(Kh, g.ld_k, n))
    kernel::gemm(false, false, rows, n, g.d, Q + g.at(h, i0, g.Tq, g.d, g.ld_q), g.ld_q, Kt.data, Kt.ld, P, n, false);
  else
    kernel::gemm(false, true, rows, n, g.d, Q + g.at(h, i0, g.Tq, g.d, g.ld_q), g.ld_q, Kh, g.ld_k, P, n, false);
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  for (std::int64_t i = i0; i < i1; ++i) {
    T* s = P + (i - i0) * n;
    const std::int64_t r = h * g.Tq + i;
    if (recompute && lse[r] == std::numeric_limits<T>::infinity()) {  // every key masked: p = 0
      std::fill(s, s + n, T(0));
      continue;
    }
    const std::int64_t last = std::max<std::int64_t>(0, g.causal ? std::min(n, i + (g.Tk - g.Tq) + 1) : n);  // keys [0, last) unmasked by causality
    t.unary[simd::scale][ti](s, s, last, g.scale);
    if (g.bias.t) {
      const T* b = g.bias.t->as<T>() + g.row(g.bias, h, i);
      const std::int64_t bs = g.key_stride(g.bias);
      for (std::int64_t j = 0; j < last; ++j) s[j] += b[j * bs];
    }
    std::fill(s + last, s + n, ninf);
    if (g.mask.t) {
      const std::int32_t* m = g.mask.t->as<std::int32_t>() + g.row(g.mask, h, i);
      const std::int64_t ms = g.key_stride(g.mask);
      for (std::int64_t j = 0; j < last; ++j)
        if (m[j * ms] == 0) s[j] = ninf;
    }
    bool any = false;  // a key left with a finite score (a -inf bias masks too)
    for (std::int64_t j = 0; j < last && !any; ++j) any = s[j] > ninf;
    if (!any) {  // every key masked: zeros, and an infinite lse makes every p zero in the vjp
      std::fill(s, s + n, T(0));
      if (!recompute) lse[r] = std::numeric_limits<T>::infinity();
      continue;
    }
    if (recompute) {
      const T l = lse[r];
      for (std::int64_t j = 0; j < n; ++j) s[j] -= l;
      t.unary[simd::exp][ti](s, s, n, 0);
    } else {
      t.softmax_row[ti](s, s, n, false, &lse[r]);
    }
  }
}

// P * dropout factors, into D (a copy: the vjp needs both).
template <class T>
void apply_dropout(const Geometry& g, std::uint64_t key, std::int64_t h, std::int64_t i0, std::int64_t i1, std::int64_t n,
                   const T* P, T* D) {
  for (std::int64_t i = i0; i < i1; ++i)
    for (std::int64_t j = 0; j < n; ++j) D[(i - i0) * n + j] = P[(i - i0) * n + j] * drop<T>(g, key, h, i, j);
}

}  // namespace

// Forward: per (head, block of up to 64 queries), S = Q K^T, softmax rows, O = P V: two GEMMs.
template <class T>
void AttentionOp::forward(const OpArgs& a) {
  const Geometry g = geometry(a);
  const Operands<const T> in = operands<const T>(g, a.in);
  const T *Q = in.q, *K = in.k, *V = in.v;
  T *O = a.out.as<T>(), *lse = a.scratch.as<T>();
  const std::uint64_t key = random::key(a.seed, a.step, std::uint64_t(a.node));
  const std::int64_t qb = query_block<T>(g), blocks = (g.Tq + qb - 1) / qb;
  kernel::parallel(g.heads * blocks, 1, [&](std::int64_t b0, std::int64_t b1) { run_isolated([&] {
    alignas(64) T local[2][kWork<T>];
    alignas(64) T kt[kTransposedMax<T>];
    Transposed<T> Kt = transposed(kt, g.d, g.Tk);  // K^T of head kt_head, kept over its blocks
    std::int64_t kt_head = -1;
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t h = b / blocks, i0 = (b % blocks) * qb, i1 = std::min(g.Tq, i0 + qb);
      const std::int64_t n = keys_seen(g, i1), rows = i1 - i0;
      T* out = O + g.at(h, i0, g.Tq, g.dv, g.ld_o);
      if (n == 0) {
        zero_rows(g, O, h, i0, i1, g.Tq, g.dv, g.ld_o);
        for (std::int64_t i = i0; i < i1; ++i) lse[h * g.Tq + i] = std::numeric_limits<T>::infinity();
        continue;
      }
      T* P = workspace<T>(local[0], 0, std::size_t(rows * n));
      if (h != kt_head) Kt = transposed(kt, g.d, g.Tk), kt_head = h;  // a task's blocks run in order
      probabilities(g, Q, K, Kt, lse, false, h, i0, i1, n, P);
      if (g.p > 0) {
        T* D = workspace<T>(local[1], 1, std::size_t(rows * n));
        apply_dropout(g, key, h, i0, i1, n, P, D);
        P = D;
      }
      kernel::gemm(false, false, rows, g.dv, n, P, n, V + g.at(h, 0, g.Tk, g.dv, g.ld_v), g.ld_v, out, g.ld_o, false);
    }
  }); });
}

// VJP, per head (its query blocks in order, so dK and dV add up in a fixed order): recompute P
// from lse, then dV += P'^T dO, dP = dO V^T, dS = P (z dP - rowsum(dO O)) scale, dQ += dS K,
// dK += dS^T Q: five GEMMs per block.
template <class T>
void AttentionOp::vjp(const OpArgs& a) {
  const Geometry g = geometry(a);
  const Operands<const T> in = operands<const T>(g, a.in);
  const Operands<T> gin = operands<T>(g, a.gin);
  const T *Q = in.q, *K = in.k, *V = in.v, *O = a.out.as<T>();
  T* lse = a.scratch.as<T>();
  const T* G = a.gout->as<T>();
  T *gQ = gin.q, *gK = gin.k, *gV = gin.v;
  // Assigned gradients (OpArgs::assign): packed, q, k and v are one input.
  const bool assign_q = a.assign(0), assign_k = a.assign(g.packed ? 0 : 1), assign_v = a.assign(g.packed ? 0 : 2);
  T* gB = g.bias.t ? a.gin[g.bias.in].as<T>() : nullptr;
  // Packed, the bias may sit where k or v would (input 1 or 2) and be told to assign: it adds up
  // over heads and rows, so it starts at zero.
  if (gB && a.assign(g.bias.in)) std::fill_n(gB, a.in[g.bias.in].numel, T(0));
  const std::uint64_t key = random::key(a.seed, a.step, std::uint64_t(a.node));
  const std::int64_t qb = query_block<T>(g);
  // Heads that share a slice of the bias (it broadcasts over some leading dims, e.g. T5's over
  // the batch) run in one task, in order, so its gradient adds up in a fixed order; tasks run
  // over the other leading dims. Without a bias gradient every head is its own task.
  auto shared = [&](int l) { return gB && g.bias.stride[std::size_t(l)] == 0; };
  std::int64_t groups = 1, members = 1;
  for (int l = 0; l < g.n_lead; ++l) (shared(l) ? members : groups) *= g.lead[std::size_t(l)];
  auto head_of = [&](std::int64_t group, std::int64_t member) {
    std::int64_t h = 0, mult = 1;
    for (int l = g.n_lead - 1; l >= 0; --l) {
      const std::int64_t L = g.lead[std::size_t(l)];
      std::int64_t& from = shared(l) ? member : group;
      h += (from % L) * mult;
      from /= L, mult *= L;
    }
    return h;
  };
  constexpr int ti = std::is_same_v<T, double> ? 1 : 0;
  const simd::Table& t = simd::best();
  kernel::parallel(groups, 1, [&](std::int64_t g0, std::int64_t g1) { run_isolated([&] {
    alignas(64) T local[3][kWork<T>];
    alignas(64) T kt[kTransposedMax<T>], vt[kTransposedMax<T>];
    for (std::int64_t hg = g0 * members; hg < g1 * members; ++hg) {
      const std::int64_t h = head_of(hg / members, hg % members);
      // K^T and V^T of this head, extended as its blocks see more keys (causal).
      Transposed<T> Kt = transposed(kt, g.d, g.Tk), Vt = transposed(vt, g.dv, g.Tk);
      // Assigned gradients: dK and dV add up over the query blocks, so this head's part starts
      // at zero here (in cache); dQ's rows are written by their one block.
      if (gK && assign_k) zero_rows(g, gK, h, 0, g.Tk, g.Tk, g.d, g.ld_k);
      if (gV && assign_v) zero_rows(g, gV, h, 0, g.Tk, g.Tk, g.dv, g.ld_v);
      for (std::int64_t i0 = 0; i0 < g.Tq; i0 += qb) {
        const std::int64_t i1 = std::min(g.Tq, i0 + qb), rows = i1 - i0, n = keys_seen(g, i1);
        if (n == 0) {
          if (gQ && assign_q) zero_rows(g, gQ, h, i0, i1, g.Tq, g.d, g.ld_q);
          continue;
        }
        T* P = workspace<T>(local[0], 0, std::size_t(rows * n));
        T* dP = workspace<T>(local[1], 1, std::size_t(rows * n));
        T* Pd = workspace<T>(local[2], 2, std::size_t(rows * n));  // P with dropout applied
        probabilities(g, Q, K, Kt, lse, true, h, i0, i1, n, P);
        if (g.p > 0) apply_dropout(g, key, h, i0, i1, n, P, Pd);
        const T* Pdrop = g.p > 0 ? Pd : P;
        const T* dO = G + g.at(h, i0, g.Tq, g.dv, g.ld_o);
        const std::int64_t ldo = g.ld_o;
        if (gV) kernel::gemm(true, false, n, g.dv, rows, Pdrop, n, dO, ldo, gV + g.at(h, 0, g.Tk, g.dv, g.ld_v), g.ld_v, true);
        if (!gQ && !gK && !gB) continue;
        const T* Vh = V + g.at(h, 0, g.Tk, g.dv, g.ld_v);
        if (Vt.cover(Vh, g.ld_v, n))
          kernel::gemm(false, false, rows, n, g.dv, dO, ldo, Vt.data, Vt.ld, dP, n, false);
        else
          kernel::gemm(false, true, rows, n, g.dv, dO, ldo, Vh, g.ld_v, dP, n, false);
        for (std::int64_t i = i0; i < i1; ++i) {
          T* ds = dP + (i - i0) * n;
          const T* p = P + (i - i0) * n;
          // dz: the gradient of the scaled, biased scores; the raw scores' is dz * scale.
          if (g.p > 0) {
            const T Di = dot(dO + (i - i0) * ldo, O + g.at(h, i, g.Tq, g.dv, g.ld_o), g.dv);  // = sum_j p_ij z_ij dp_ij
            const T* pd = Pd + (i - i0) * n;
            // p z dp = pd dp (z = pd / p where p > 0; where p = 0 the term is 0 either way)
            for (std::int64_t j = 0; j < n; ++j) ds[j] = pd[j] * ds[j] - p[j] * Di;
          } else {
            t.softmax_vjp_row[ti](p, ds, ds, n, false, true);  // p (dp - sum_j p_j dp_j), in place
          }
          if (gB) {
            T* gb = gB + g.row(g.bias, h, i);
            const std::int64_t bs = g.key_stride(g.bias);
            for (std::int64_t j = 0; j < n; ++j) gb[j * bs] += ds[j];
          }
          t.unary[simd::scale][ti](ds, ds, n, g.scale);
        }
        if (gQ)
          kernel::gemm(false, false, rows, g.d, n, dP, n, K + g.at(h, 0, g.Tk, g.d, g.ld_k), g.ld_k, gQ + g.at(h, i0, g.Tq, g.d, g.ld_q),
                       g.ld_q, !assign_q);
        if (gK)
          kernel::gemm(true, false, n, g.d, rows, dP, n, Q + g.at(h, i0, g.Tq, g.d, g.ld_q), g.ld_q, gK + g.at(h, 0, g.Tk, g.d, g.ld_k),
                       g.ld_k, true);
      }
    }
  }); });
}

CTGRAD_INSTANTIATE_OP(AttentionOp)

}  // namespace ctgrad
