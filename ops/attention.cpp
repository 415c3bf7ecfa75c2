#include <ctgrad/ops/attention.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/ops/detail/gemm.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <array>
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
  std::int64_t heads, Tq, Tk, d, dv;  // heads = product of q's leading dims
  bool seq_first = false;             // q, k, v, out [B, T, H, width]
  // Heads per entry of the axes before them: q's H and k's and v's (grouped-query attention:
  // query head h reads key/value head h / group of its entry).
  std::int64_t H = 1, H_kv = 1;
  bool packed = false;                // packed_qkv: q, k, v are slots 0, 1, 2 of one [B, T, 3, H, d] input
  // Distance between two rows of one head in q, k, v and out (and their gradients): the width, or
  // a token's stride when seq_first (heads x width; 3 x H x d when packed).
  std::int64_t ld_q = 0, ld_k = 0, ld_v = 0, ld_o = 0;
  std::uint64_t first = 0;             // dropout counter of element 0 (a data-parallel shard's offset)
  double scale, p;
  double softcap = 0;                  // > 0: scores c tanh(s / c)
  bool causal;
  std::int64_t window = 0;             // > 0: query i sees keys (i + Tk - Tq - window, i + Tk - Tq]
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
  std::int64_t group() const { return H / H_kv; }
  // The key/value head query head h reads.
  std::int64_t kv(std::int64_t h) const { return h / H * H_kv + h % H / group(); }
  // Offset of row i of query head h in q or out (T rows of `width`, `ld` apart), and of key head
  // hk in k or v; the same in their gradients.
  std::int64_t at(std::int64_t h, std::int64_t i, std::int64_t T, std::int64_t width, std::int64_t ld) const {
    return seq_first ? (h / H * T + i) * ld + h % H * width : (h * T + i) * ld;
  }
  std::int64_t at_kv(std::int64_t hk, std::int64_t i, std::int64_t T, std::int64_t width, std::int64_t ld) const {
    return seq_first ? (hk / H_kv * T + i) * ld + hk % H_kv * width : (hk * T + i) * ld;
  }
};

// Rows [i0, i1) of query head h (or key head h, `kv`) set to zero.
template <class T>
void zero_rows(const Geometry& g, T* x, std::int64_t h, std::int64_t i0, std::int64_t i1, std::int64_t T_len, std::int64_t width,
               std::int64_t ld, bool kv = false) {
  for (std::int64_t i = i0; i < i1; ++i) std::fill_n(x + (kv ? g.at_kv(h, i, T_len, width, ld) : g.at(h, i, T_len, width, ld)), width, T(0));
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
  if (o.seq_first) g.H = q_dim(2), g.H_kv = g.packed ? g.H : k.size(2);
  else if (q.rank >= 3) g.H = q.size(-3), g.H_kv = k.size(-3);
  g.ld_q = o.seq_first ? g.H * g.d : g.d;
  g.ld_k = o.seq_first ? g.H_kv * g.d : g.d;
  g.ld_v = o.seq_first ? g.H_kv * g.dv : g.dv;
  g.ld_o = o.seq_first ? g.H * g.dv : g.dv;
  if (g.packed) g.ld_q = g.ld_k = g.ld_v = 3 * g.H * g.d;
  g.first = a.shard * std::uint64_t(g.heads * g.Tq * g.Tk);
  g.scale = o.scale != 0 ? double(o.scale) : 1.0 / std::sqrt(double(g.d));
  g.p = a.training ? double(o.dropout) : 0.0;
  g.causal = o.causal;
  g.window = o.window;
  g.softcap = double(o.softcap);
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

// The first key a block of queries from i0 can see: under a window, the first query's earliest.
std::int64_t first_key(const Geometry& g, std::int64_t i0) {
  return g.window > 0 ? std::clamp<std::int64_t>(i0 + (g.Tk - g.Tq) - g.window + 1, 0, g.Tk) : 0;
}

// A task's work space: `local` (on its stack) when given and n fits, else a per-thread heap
// buffer (grown once, then reused step after step).
template <class T>
T* workspace(T* local, int which, std::size_t n) {
  if (local && n <= std::size_t(kWork<T>)) return local;
  thread_local std::vector<T> buf[4];
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

// The probabilities of queries [i0, i1) of head h over keys [k0, n) into P [rows, n - k0]: the
// scaled scores S = Q K^T (one GEMM, on K^T's copy when `Kt` covers the block), soft-capped,
// biased, masked, then softmax per row. Forward: lse is written; backward: lse is read and
// P = exp(S - lse), the forward's probabilities exactly recomputed, and `capped` (when soft-
// capping) receives tanh(scale s / c), which the VJP's chain rule needs (0 where masked).
template <class T>
void probabilities(const Geometry& g, const T* Q, const T* K, Transposed<T>& Kt, T* lse, bool recompute, std::int64_t h,
                   std::int64_t i0, std::int64_t i1, std::int64_t k0, std::int64_t n, T* P, T* capped = nullptr) {
  constexpr int ti = std::is_same_v<T, double> ? 1 : 0;
  const simd::Table& t = simd::best();
  const std::int64_t rows = i1 - i0, m = n - k0, shift = g.Tk - g.Tq;
  const T* Kh = K + g.at_kv(g.kv(h), 0, g.Tk, g.d, g.ld_k);
  if (Kt.cover(Kh, g.ld_k, n))
    kernel::gemm(false, false, rows, m, g.d, Q + g.at(h, i0, g.Tq, g.d, g.ld_q), g.ld_q, Kt.data + k0, Kt.ld, P, m, false);
  else
    kernel::gemm(false, true, rows, m, g.d, Q + g.at(h, i0, g.Tq, g.d, g.ld_q), g.ld_q, Kh + k0 * g.ld_k, g.ld_k, P, m, false);
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  for (std::int64_t i = i0; i < i1; ++i) {
    T* s = P + (i - i0) * m;
    T* c = capped ? capped + (i - i0) * m : nullptr;
    const std::int64_t r = h * g.Tq + i;
    // Keys [lo, last) are not masked by causality or the window; s[j - k0] holds key j.
    const std::int64_t last = std::clamp<std::int64_t>(g.causal ? i + shift + 1 : n, k0, n);
    const std::int64_t lo = std::clamp<std::int64_t>(g.window > 0 ? i + shift - g.window + 1 : k0, k0, last);
    if (c) std::fill(c, c + m, T(0));
    if (recompute && lse[r] == std::numeric_limits<T>::infinity()) {  // every key masked: p = 0
      std::fill(s, s + m, T(0));
      continue;
    }
    T* sl = s + (lo - k0);
    const std::int64_t len = last - lo;
    if (g.softcap > 0) {  // c tanh(scale s / c)
      t.unary[simd::scale][ti](sl, sl, len, g.scale / g.softcap);
      t.unary[simd::tanh][ti](sl, sl, len, 0);
      if (c) std::copy(sl, sl + len, c + (lo - k0));
      t.unary[simd::scale][ti](sl, sl, len, g.softcap);
    } else {
      t.unary[simd::scale][ti](sl, sl, len, g.scale);
    }
    if (g.bias.t) {
      const T* b = g.bias.t->as<T>() + g.row(g.bias, h, i);
      const std::int64_t bs = g.key_stride(g.bias);
      for (std::int64_t j = lo; j < last; ++j) s[j - k0] += b[j * bs];
    }
    std::fill(s, sl, ninf);
    std::fill(sl + len, s + m, ninf);
    if (g.mask.t) {
      const std::int32_t* mk = g.mask.t->as<std::int32_t>() + g.row(g.mask, h, i);
      const std::int64_t ms = g.key_stride(g.mask);
      for (std::int64_t j = lo; j < last; ++j)
        if (mk[j * ms] == 0) s[j - k0] = ninf;
    }
    bool any = false;  // a key left with a finite score (a -inf bias masks too)
    for (std::int64_t j = 0; j < len && !any; ++j) any = sl[j] > ninf;
    if (!any) {  // every key masked: zeros, and an infinite lse makes every p zero in the vjp
      std::fill(s, s + m, T(0));
      if (!recompute) lse[r] = std::numeric_limits<T>::infinity();
      continue;
    }
    if (recompute) {
      const T l = lse[r];
      for (std::int64_t j = 0; j < m; ++j) s[j] -= l;
      t.unary[simd::exp][ti](s, s, m, 0);
    } else {
      t.softmax_row[ti](s, s, m, false, &lse[r]);
    }
  }
}

// P (keys [k0, n)) * dropout factors, into D (a copy: the vjp needs both).
template <class T>
void apply_dropout(const Geometry& g, std::uint64_t key, std::int64_t h, std::int64_t i0, std::int64_t i1, std::int64_t k0,
                   std::int64_t n, const T* P, T* D) {
  const std::int64_t m = n - k0;
  for (std::int64_t i = i0; i < i1; ++i)
    for (std::int64_t j = k0; j < n; ++j) D[(i - i0) * m + j - k0] = P[(i - i0) * m + j - k0] * drop<T>(g, key, h, i, j);
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
    Transposed<T> Kt = transposed(kt, g.d, g.Tk);  // K^T of key head kt_head, kept over its blocks
    std::int64_t kt_head = -1;
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t h = b / blocks, i0 = (b % blocks) * qb, i1 = std::min(g.Tq, i0 + qb);
      const std::int64_t n = keys_seen(g, i1), k0 = first_key(g, i0), rows = i1 - i0;
      T* out = O + g.at(h, i0, g.Tq, g.dv, g.ld_o);
      if (n <= k0) {
        zero_rows(g, O, h, i0, i1, g.Tq, g.dv, g.ld_o);
        for (std::int64_t i = i0; i < i1; ++i) lse[h * g.Tq + i] = std::numeric_limits<T>::infinity();
        continue;
      }
      T* P = workspace<T>(local[0], 0, std::size_t(rows * (n - k0)));
      // A task's blocks run in order, and a group's query heads one after another.
      if (g.kv(h) != kt_head) Kt = transposed(kt, g.d, g.Tk), kt_head = g.kv(h);
      probabilities(g, Q, K, Kt, lse, false, h, i0, i1, k0, n, P);
      if (g.p > 0) {
        T* D = workspace<T>(local[1], 1, std::size_t(rows * (n - k0)));
        apply_dropout(g, key, h, i0, i1, k0, n, P, D);
        P = D;
      }
      kernel::gemm(false, false, rows, g.dv, n - k0, P, n - k0, V + g.at_kv(g.kv(h), k0, g.Tk, g.dv, g.ld_v), g.ld_v, out, g.ld_o,
                   false);
    }
  }); });
}

// VJP, per head (its query blocks in order, so dK and dV add up in a fixed order): recompute P
// from lse, then dV += P'^T dO, dP = dO V^T, dS = P (z dP - rowsum(dO O)) scale, dQ += dS K,
// dK += dS^T Q: five GEMMs per block. The query heads of one key/value head run in one task, in
// order, so their dK and dV add up in a fixed order too.
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
  // The leading dims as tasks see them: the head axis split into (key/value head, member of its
  // group), which keeps each head's flat index. Axes over which something adds up run in one
  // task, in order: a group's members (they share dK and dV) and the axes a bias broadcasts over
  // (e.g. T5's over the batch: its gradient adds up). Tasks run over the other axes.
  std::array<std::int64_t, kMaxRank + 1> dims{};
  std::array<bool, kMaxRank + 1> shared{};
  const int head_axis = g.seq_first ? 1 : g.n_lead - 1;  // -1: no head axis (rank-2 inputs)
  int n_dims = 0;
  for (int l = 0; l < g.n_lead; ++l) {
    const bool bias_shared = gB && g.bias.stride[std::size_t(l)] == 0;
    if (l == head_axis && g.group() > 1) {
      dims[std::size_t(n_dims)] = g.H_kv, shared[std::size_t(n_dims++)] = bias_shared;
      dims[std::size_t(n_dims)] = g.group(), shared[std::size_t(n_dims++)] = true;
    } else {
      dims[std::size_t(n_dims)] = g.lead[std::size_t(l)], shared[std::size_t(n_dims++)] = bias_shared;
    }
  }
  std::int64_t groups = 1, members = 1;
  for (int l = 0; l < n_dims; ++l) (shared[std::size_t(l)] ? members : groups) *= dims[std::size_t(l)];
  auto head_of = [&](std::int64_t group, std::int64_t member) {
    std::int64_t h = 0, mult = 1;
    for (int l = n_dims - 1; l >= 0; --l) {
      const std::int64_t L = dims[std::size_t(l)];
      std::int64_t& from = shared[std::size_t(l)] ? member : group;
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
    // K^T and V^T of key/value head kt_head, extended as its blocks see more keys (causal), and
    // kept over the query heads of its group.
    Transposed<T> Kt = transposed(kt, g.d, g.Tk), Vt = transposed(vt, g.dv, g.Tk);
    std::int64_t kt_head = -1;
    for (std::int64_t hg = g0 * members; hg < g1 * members; ++hg) {
      const std::int64_t h = head_of(hg / members, hg % members), hk = g.kv(h);
      if (hk != kt_head) Kt = transposed(kt, g.d, g.Tk), Vt = transposed(vt, g.dv, g.Tk), kt_head = hk;
      // Assigned gradients: dK and dV add up over the query blocks (and a group's heads), so
      // they start at zero at the group's first head (in cache); dQ's rows are written by their
      // one block.
      if (h % g.H % g.group() == 0) {
        if (gK && assign_k) zero_rows(g, gK, hk, 0, g.Tk, g.Tk, g.d, g.ld_k, true);
        if (gV && assign_v) zero_rows(g, gV, hk, 0, g.Tk, g.Tk, g.dv, g.ld_v, true);
      }
      for (std::int64_t i0 = 0; i0 < g.Tq; i0 += qb) {
        const std::int64_t i1 = std::min(g.Tq, i0 + qb), rows = i1 - i0, n = keys_seen(g, i1), k0 = first_key(g, i0);
        const std::int64_t m = n - k0;
        if (m <= 0) {
          if (gQ && assign_q) zero_rows(g, gQ, h, i0, i1, g.Tq, g.d, g.ld_q);
          continue;
        }
        T* P = workspace<T>(local[0], 0, std::size_t(rows * m));
        T* dP = workspace<T>(local[1], 1, std::size_t(rows * m));
        T* Pd = workspace<T>(local[2], 2, std::size_t(rows * m));  // P with dropout applied
        // tanh of the capped scores: in Pd's place without dropout, else a heap buffer.
        T* C = g.softcap <= 0 ? nullptr : g.p > 0 ? workspace<T>(nullptr, 3, std::size_t(rows * m)) : Pd;
        probabilities(g, Q, K, Kt, lse, true, h, i0, i1, k0, n, P, C);
        if (g.p > 0) apply_dropout(g, key, h, i0, i1, k0, n, P, Pd);
        const T* Pdrop = g.p > 0 ? Pd : P;
        const T* dO = G + g.at(h, i0, g.Tq, g.dv, g.ld_o);
        const std::int64_t ldo = g.ld_o;
        if (gV)
          kernel::gemm(true, false, m, g.dv, rows, Pdrop, m, dO, ldo, gV + g.at_kv(hk, k0, g.Tk, g.dv, g.ld_v), g.ld_v, true);
        if (!gQ && !gK && !gB) continue;
        const T* Vh = V + g.at_kv(hk, 0, g.Tk, g.dv, g.ld_v);
        if (Vt.cover(Vh, g.ld_v, n))
          kernel::gemm(false, false, rows, m, g.dv, dO, ldo, Vt.data + k0, Vt.ld, dP, m, false);
        else
          kernel::gemm(false, true, rows, m, g.dv, dO, ldo, Vh + k0 * g.ld_v, g.ld_v, dP, m, false);
        for (std::int64_t i = i0; i < i1; ++i) {
          T* ds = dP + (i - i0) * m;
          const T* p = P + (i - i0) * m;
          // dz: the gradient of the final scores (capped, biased); the raw scores' is dz * scale,
          // times 1 - tanh^2 when capped.
          if (g.p > 0) {
            const T Di = dot(dO + (i - i0) * ldo, O + g.at(h, i, g.Tq, g.dv, g.ld_o), g.dv);  // = sum_j p_ij z_ij dp_ij
            const T* pd = Pd + (i - i0) * m;
            // p z dp = pd dp (z = pd / p where p > 0; where p = 0 the term is 0 either way)
            for (std::int64_t j = 0; j < m; ++j) ds[j] = pd[j] * ds[j] - p[j] * Di;
          } else {
            t.softmax_vjp_row[ti](p, ds, ds, m, false, true);  // p (dp - sum_j p_j dp_j), in place
          }
          if (gB) {
            T* gb = gB + g.row(g.bias, h, i) + k0 * g.key_stride(g.bias);
            const std::int64_t bs = g.key_stride(g.bias);
            for (std::int64_t j = 0; j < m; ++j) gb[j * bs] += ds[j];
          }
          if (C) {
            const T* c = C + (i - i0) * m;
            for (std::int64_t j = 0; j < m; ++j) ds[j] *= T(1) - c[j] * c[j];
          }
          t.unary[simd::scale][ti](ds, ds, m, g.scale);
        }
        if (gQ)
          kernel::gemm(false, false, rows, g.d, m, dP, m, K + g.at_kv(hk, k0, g.Tk, g.d, g.ld_k), g.ld_k,
                       gQ + g.at(h, i0, g.Tq, g.d, g.ld_q), g.ld_q, !assign_q);
        if (gK)
          kernel::gemm(true, false, m, g.d, rows, dP, m, Q + g.at(h, i0, g.Tq, g.d, g.ld_q), g.ld_q,
                       gK + g.at_kv(hk, k0, g.Tk, g.d, g.ld_k), g.ld_k, true);
      }
    }
  }); });
}

CTGRAD_INSTANTIATE_OP(AttentionOp)

}  // namespace ctgrad
