// Fused scaled dot-product attention: out = softmax(scale q k^T, masked) v, with dropout on the
// probabilities. q [..., Tq, d], k [..., Tk, d], v [..., Tk, dv], optional mask broadcasting to
// [..., Tq, Tk] (0 = masked); the leading dims (batch, heads) must agree.
//
// No Tq x Tk buffer is kept: per head and block of queries, the forward computes the block's
// scores with one GEMM, softmax rows, then P V, and stores only each row's log-sum-exp (scratch);
// the vjp recomputes the block's probabilities from it (ops/attention.cpp). A fully masked row
// gives zeros and passes no gradient. For visualisation,
// attention_weights() computes the same probabilities (without dropout) as an explicit tensor.
#pragma once
#include <ctgrad/ops/common.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/mask.hpp>
#include <ctgrad/ops/matmul.hpp>
#include <ctgrad/ops/softmax.hpp>

namespace ctgrad {

// attr.f[0] = scale (0: 1/sqrt(d)), attr.f[1] = dropout p, attr.i[0] = causal (key j <= query i,
// aligned at the end when Tk > Tq, as in incremental decoding).
struct AttentionOp {
  static constexpr const char* name = "attention";
  static constexpr int arity = -1;  // q, k, v[, mask]
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1) | kSaveInput(2) | kSaveInput(3) | kSaveOutput;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (c.n_in < 3) return ShapeResult::fail("needs q, k, v and an optional mask");
    const Shape &q = c.in[0], &k = c.in[1], &v = c.in[2];
    for (int i = 0; i < 3; ++i)
      if (c.dtype[i] != DType::real) return ShapeResult::fail("q, k and v must be real");
    if (q.rank < 2 || k.rank != q.rank || v.rank != q.rank)
      return ShapeResult::fail(Msg("q, k, v must have one rank >= 2, got ").add(ops::shapes_msg(c)));
    for (int i = 0; i < q.rank - 2; ++i)
      if (!(q[i] == k[i]) || !(q[i] == v[i]))
        return ShapeResult::fail(Msg("leading dim ").add(i).add(" differs in ").add(ops::shapes_msg(c)));
    if (!(q.back(1) == k.back(1))) return ShapeResult::fail(Msg("q and k head dims differ: ").add(q.back(1)).add(" vs ").add(k.back(1)));
    if (!(k.back(2) == v.back(2)))
      return ShapeResult::fail(Msg("k and v lengths differ: ").add(k.back(2)).add(" vs ").add(v.back(2)));
    if (!(c.attr.f[1] >= 0 && c.attr.f[1] < 1)) return ShapeResult::fail("dropout must be in [0, 1)");
    if (c.n_in == 4) {
      const Shape& m = c.in[3];
      if (m.rank > q.rank) return ShapeResult::fail(Msg("mask ").add(m).add(" has more dims than the scores"));
      for (int i = 0; i < m.rank; ++i) {
        const int si = q.rank - m.rank + i;
        const Dim want = si == q.rank - 1 ? k.back(2) : si == q.rank - 2 ? q.back(2) : q[si];
        if (!(m[i] == want) && !(m[i] == Dim(1)))
          return ShapeResult::fail(Msg("mask ").add(m).add(" does not broadcast to the scores: dim ").add(i).add(" is ")
                                       .add(m[i]).add(", scores have ").add(want));
      }
    }
    ShapeResult r;
    r.shape = q;
    r.shape[q.rank - 1] = v.back(1);
    Shape rows = q;
    rows.rank -= 1;
    r.scratch = rows.numel();  // log-sum-exp per query row
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct AttentionOptions {
  double scale = 0;    // 0: 1/sqrt(head dim)
  double dropout = 0;  // on the probabilities, in training only
  bool causal = false;
};

constexpr Attrs attention_attrs(const AttentionOptions& o) {
  Attrs a;
  a.f[0] = o.scale;
  a.f[1] = o.dropout;
  a.i[0] = o.causal;
  return a;
}
constexpr Value attention(Value q, Value k, Value v, AttentionOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<AttentionOp>({q, k, v}, attention_attrs(o), loc);
}
constexpr Value attention(Value q, Value k, Value v, Value mask, AttentionOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<AttentionOp>({q, k, v, mask}, attention_attrs(o), loc);
}

// The probabilities attention() uses, as a [..., Tq, Tk] tensor (no dropout): for heatmaps. The
// same scale default (0: 1/sqrt(head dim)); pass causal_mask(...) as the mask for a causal model.
// One difference: a fully masked row comes out uniform here, where attention() gives zeros.
constexpr Value attention_weights(Value q, Value k, Value mask, double scale = 0, Loc loc = Loc::current()) {
  if (scale == 0) scale = 1 / ops::const_sqrt(double(q.shape().back(1).coef));
  return softmax(masked_fill(ctgrad::scale(matmul(q, k, {.trans_b = true}, loc), scale, loc), mask, -1e30, loc), loc);
}

}  // namespace ctgrad
