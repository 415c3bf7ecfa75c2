// Fused scaled dot-product attention: out = softmax(scale q k^T + bias, masked) v, with dropout on
// the probabilities. q [..., H, Tq, d], k [..., H_kv, Tk, d], v [..., H_kv, Tk, dv]; the leading
// dims (batch) agree, and H_kv divides H: grouped-query attention (multi-query when H_kv = 1),
// query head h reading key/value head h / (H / H_kv), with no copy of k or v; H_kv = H is
// ordinary multi-head attention. Options: `causal`, with a sliding `window` (each query sees
// itself and the window - 1 keys before it, computed without a mask), and `softcap` c > 0,
// which caps the scaled scores to c tanh(s / c) before the bias is added (Gemma 2). After q, k, v come up to two optional inputs, told apart by dtype, as in
// PyTorch's scaled_dot_product_attention: an int32 mask (0 = masked) selects, a real tensor adds
// to the scaled scores (T5's relative position bias, ALiBi, a float mask of -inf); both
// broadcast to the scores [..., Tq, Tk], and the bias gets a gradient.
// With `seq_first`, q [B, Tq, H, d], k [B, Tk, H_kv, d], v [B, Tk, H_kv, dv], out [B, Tq, H, dv]: the
// layout of a projection's output reshaped to heads, so head split and merge are views (no
// transposes); the scores, mask and bias stay [B, H, Tq, Tk]. With `packed_qkv` too (self-
// attention), q, k and v are one input [B, T, 3, H, d]: a fused projection's output reshaped (a
// view), read and its gradient written in place, with no copy of q, k, v out of it; the mask and
// bias follow it.
//
// No Tq x Tk buffer is kept: per head and block of queries, the forward computes the block's
// scores with one GEMM, softmax rows, then P V, and stores only each row's log-sum-exp (scratch);
// the vjp recomputes the block's probabilities from it (ops/attention.cpp). A fully masked row
// gives zeros and passes no gradient. For visualisation, attention_weights() computes the same
// probabilities (without dropout) as an explicit tensor.
#pragma once
#include <optional>

#include <ctgrad/ops/common.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/mask.hpp>
#include <ctgrad/ops/matmul.hpp>
#include <ctgrad/ops/shape.hpp>
#include <ctgrad/ops/softmax.hpp>
#include <ctgrad/ops/unary.hpp>

namespace ctgrad {

struct AttentionOptions {
  Real scale = 0;      // 0: 1/sqrt(head dim)
  Real dropout = 0;    // on the probabilities, in training only
  bool causal = false;  // key j <= query i, aligned at the end when Tk > Tq (incremental decoding)
  int window = 0;       // with causal: key j > query i - window as well (0: unlimited)
  Real softcap = 0;     // > 0: scaled scores s become softcap * tanh(s / softcap)
  bool seq_first = false;  // q, k, v, out [B, T, H, d] instead of [..., H, T, d] (see above)
  bool packed_qkv = false;  // with seq_first: q, k, v in one input [B, T, 3, H, d] (see above)
};

struct AttentionOp {
  using Options = AttentionOptions;
  static constexpr const char* name = "attention";
  static constexpr int arity = -1;  // q, k, v[, mask][, bias]
  static constexpr unsigned saves = kSaveAll;
  static constexpr unsigned assigns = kSaveInput(0) | kSaveInput(1) | kSaveInput(2);
  static constexpr ShapeResult shape(const ShapeCtx& c, const AttentionOptions& o) {
    const int n_qkv = o.packed_qkv ? 1 : 3;  // the inputs before the mask and bias
    if (c.n_in < n_qkv)
      return ShapeResult::fail(o.packed_qkv ? "needs qkv and an optional mask and bias" : "needs q, k, v and an optional mask and bias");
    for (int i = 0; i < n_qkv; ++i)
      if (c.dtype[i] != DType::real) return ShapeResult::fail(o.packed_qkv ? "qkv must be real" : "q, k and v must be real");
    Shape packed;  // packed_qkv: q, k and v as each is seen, [B, T, H, d]
    if (o.packed_qkv) {
      const Shape& p = c.in[0];
      if (!o.seq_first) return ShapeResult::fail("packed_qkv needs seq_first (q, k, v and out [B, T, H, d])");
      if (p.rank != 5 || !(p[2] == Dim(3)))
        return ShapeResult::fail(Msg("packed_qkv needs qkv as [B, T, 3, H, d], got ").add(ops::shapes_msg(c)));
      packed = Shape{p[0], p[1], p[3], p[4]};
    }
    const Shape &q = o.packed_qkv ? packed : c.in[0], &k = o.packed_qkv ? packed : c.in[1], &v = o.packed_qkv ? packed : c.in[2];
    if (o.seq_first ? (q.rank != 4 || k.rank != 4 || v.rank != 4) : (q.rank < 2 || k.rank != q.rank || v.rank != q.rank))
      return ShapeResult::fail(Msg(o.seq_first ? "seq_first needs q, k, v as [B, T, H, d], got " : "q, k, v must have one rank >= 2, got ")
                                   .add(ops::shapes_msg(c)));
    // Lengths sit at axis 1 (seq_first) or -2, heads at axis 2 (seq_first) or -3; the other axes
    // but the last must agree.
    const int len_axis = o.seq_first ? 1 : q.rank - 2, head_axis = o.seq_first ? 2 : q.rank - 3;
    for (int i = 0; i < q.rank - 1; ++i)
      if (i != len_axis && i != head_axis && (!(q[i] == k[i]) || !(q[i] == v[i])))
        return ShapeResult::fail(Msg("leading dim ").add(i).add(" differs in ").add(ops::shapes_msg(c)));
    if (head_axis >= 0) {
      const Dim H = q[head_axis], H_kv = k[head_axis];
      if (!(H_kv == v[head_axis]))
        return ShapeResult::fail(Msg("k and v head counts differ: ").add(H_kv).add(" vs ").add(v[head_axis]));
      if (!(H == H_kv) && (!H.is_static() || !H_kv.is_static() || H_kv.coef <= 0 || H.coef % H_kv.coef != 0))
        return ShapeResult::fail(Msg("key/value heads (").add(H_kv).add(") must divide query heads (").add(H)
                                     .add(") for grouped-query attention, in ").add(ops::shapes_msg(c)));
    }
    if (!(q.back(1) == k.back(1))) return ShapeResult::fail(Msg("q and k head dims differ: ").add(q.back(1)).add(" vs ").add(k.back(1)));
    const Dim Tq = q[len_axis], Tk = k[len_axis];
    if (!(Tk == v[len_axis]))
      return ShapeResult::fail(Msg("k and v lengths differ: ").add(Tk).add(" vs ").add(v[len_axis]));
    if (!(o.dropout >= 0 && o.dropout < 1)) return ShapeResult::fail(Msg("dropout must be in [0, 1), got ").add_number(o.dropout));
    if (o.window < 0) return ShapeResult::fail(Msg("window must be >= 0 (0: unlimited), got ").add(o.window));
    if (o.window > 0 && !o.causal) return ShapeResult::fail("window needs causal (a sliding window over the keys before each query)");
    if (!(o.softcap >= 0)) return ShapeResult::fail(Msg("softcap must be >= 0 (0: none), got ").add_number(o.softcap));
    int masks = 0, biases = 0;
    for (int in = n_qkv; in < c.n_in; ++in) {
      const bool is_mask = c.dtype[in] == DType::index;
      if ((is_mask ? ++masks : ++biases) > 1)
        return ShapeResult::fail(Msg("takes at most one mask (int32) and one bias (real), got two ").add(is_mask ? "masks" : "biases"));
      const char* what = is_mask ? "mask " : "bias ";
      const Shape& m = c.in[in];
      if (m.rank > q.rank) return ShapeResult::fail(Msg(what).add(m).add(" has more dims than the scores"));
      for (int i = 0; i < m.rank; ++i) {
        const int si = q.rank - m.rank + i;
        // The scores: [..., H, Tq, Tk]; seq_first: [B, H, Tq, Tk] from q [B, Tq, H, d].
        const Dim want = si == q.rank - 1 ? Tk : si == q.rank - 2 ? Tq : o.seq_first && si == 1 ? q[2] : q[si];
        if (!(m[i] == want) && !(m[i] == Dim(1)))
          return ShapeResult::fail(Msg(what).add(m).add(" does not broadcast to the scores: dim ").add(i).add(" is ")
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

// `extra`: an int32 mask that selects, a real bias that adds (see AttentionOp), or both.
constexpr Value attention(Value q, Value k, Value v, AttentionOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<AttentionOp>({q, k, v}, o, loc);
}
constexpr Value attention(Value q, Value k, Value v, Value extra, AttentionOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<AttentionOp>({q, k, v, extra}, o, loc);
}
constexpr Value attention(Value q, Value k, Value v, Value mask, Value bias, AttentionOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<AttentionOp>({q, k, v, mask, bias}, o, loc);
}

// Self-attention on a fused projection's output qkv [B, T, 3, H, d] (q, k, v read in place);
// out [B, T, H, d]. `extra`: a mask and/or bias as for attention(). Sets seq_first and packed_qkv.
constexpr Value attention_packed(Value qkv, AttentionOptions o = {}, Loc loc = Loc::current()) {
  o.seq_first = o.packed_qkv = true;
  return ops::apply<AttentionOp>({qkv}, o, loc);
}
constexpr Value attention_packed(Value qkv, Value extra, AttentionOptions o = {}, Loc loc = Loc::current()) {
  o.seq_first = o.packed_qkv = true;
  return ops::apply<AttentionOp>({qkv, extra}, o, loc);
}
constexpr Value attention_packed(Value qkv, Value mask, Value bias, AttentionOptions o = {}, Loc loc = Loc::current()) {
  o.seq_first = o.packed_qkv = true;
  return ops::apply<AttentionOp>({qkv, mask, bias}, o, loc);
}

// The probabilities attention() uses, as a [..., H, Tq, Tk] tensor (no dropout): for heatmaps.
// The same options, q, k as [..., H, T, d] (not seq_first; grouped heads too); `mask` (int32, may
// be absent) selects, `bias` (may be absent) adds. One difference: a fully masked row comes out
// uniform here, where attention() gives zeros. A constant softcap only.
constexpr Value attention_weights(Value q, Value k, std::optional<Value> mask, std::optional<Value> bias, AttentionOptions o = {},
                                  Loc loc = Loc::current()) {
  const Real scale = o.scale.is_hyper() || o.scale.value != 0 ? o.scale : Real(1 / ops::const_sqrt(double(q.shape().back(1).coef)));
  const Shape qs = q.shape(), ks = k.shape();
  const Dim Tq = qs.back(2), Tk = ks.back(2);
  Value s;
  if (qs.rank >= 3 && !(qs.back(3) == ks.back(3))) {  // grouped: the group's queries as one matrix per key head
    Shape grouped = ks;
    grouped[ks.rank - 2] = Dim(qs.back(3).coef / ks.back(3).coef) * Tq;
    grouped[ks.rank - 1] = qs.back(1);
    Shape scores = qs;
    scores[qs.rank - 1] = Tk;
    s = reshape(matmul(reshape(q, grouped, loc), k, {.trans_b = true}, loc), scores, loc);
  } else {
    s = matmul(q, k, {.trans_b = true}, loc);
  }
  if (o.softcap.value > 0)
    s = ctgrad::scale(tanh(ctgrad::scale(s, Real(double(scale) / o.softcap.value), loc), loc), o.softcap.value, loc);
  else
    s = ctgrad::scale(s, scale, loc);
  if (bias) s = add(s, *bias, loc);
  if (o.causal) s = masked_fill(s, causal_mask(Scope{q.b, {}, loc}, Tq, Tk, o.window, loc), -1e30, loc);
  if (mask) s = masked_fill(s, *mask, -1e30, loc);
  return softmax(s, loc);
}

}  // namespace ctgrad
