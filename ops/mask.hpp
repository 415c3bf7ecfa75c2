// masked_fill(x, mask, value): x where mask != 0, value elsewhere; mask broadcasts to x
// (e.g. a key-padding mask [Batch,1,SeqKV] over attention scores [Batch,Seq,SeqKV]).
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct MaskedFillOp {
  static constexpr const char* name = "masked_fill";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (c.dtype[0] != DType::real) return ShapeResult::fail("expects a real tensor to fill");
    const Shape &x = c.in[0], &m = c.in[1];
    if (m.rank > x.rank) return ShapeResult::fail(Msg("mask ").add(m).add(" has more dims than ").add(x));
    for (int i = 0; i < m.rank; ++i) {
      const Dim& md = m[i];
      const Dim& xd = x[x.rank - m.rank + i];
      if (!(md == xd) && !(md == Dim(1)))
        return ShapeResult::fail(Msg("mask ").add(m).add(" does not broadcast to ").add(x).add(": ").add(md)
                                     .add(" vs ").add(xd));
    }
    ShapeResult r;
    r.shape = x;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// Causal mask [T, T] (1 where key j <= query i), T taken from axis attr.i[0] of the input (only
// its shape is read). Broadcasts over scores [Batch, heads, T, T].
struct CausalMaskOp {
  static constexpr const char* name = "causal_mask";
  static constexpr int arity = 1;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const int ax = ops::norm_axis(c.attr.i[0], c.in[0].rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(c.attr.i[0]).add(" out of range for ").add(c.in[0]));
    ShapeResult r;
    r.shape = Shape{c.in[0][ax], c.in[0][ax]};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

// Key-padding mask from valid lengths: lengths [Batch] int32, `like` a tensor whose axis attr.i[0]
// is the key axis; out [Batch, 1, ..., 1, T] with attr.i[1] singleton dims (2: over [B, heads,
// Tq, Tk] scores), 1 where key j < length[b].
struct KeyPaddingMaskOp {
  static constexpr const char* name = "key_padding_mask";
  static constexpr int arity = 2;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape &len = c.in[0], &like = c.in[1];
    if (c.dtype[0] != DType::index || len.rank != 1) return ShapeResult::fail(Msg("lengths must be int32 [Batch], got ").add(len));
    const int ax = ops::norm_axis(c.attr.i[0], like.rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(c.attr.i[0]).add(" out of range for ").add(like));
    if (c.attr.i[1] < 0 || c.attr.i[1] > kMaxRank - 2) return ShapeResult::fail("bad number of singleton dims");
    ShapeResult r;
    r.shape.rank = int(c.attr.i[1]) + 2;
    r.shape[0] = len[0];
    for (int i = 1; i <= c.attr.i[1]; ++i) r.shape[i] = 1;
    r.shape[r.shape.rank - 1] = like[ax];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

constexpr Value causal_mask(Value like, int seq_axis = 1, Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = seq_axis;
  return ops::apply<CausalMaskOp>({like}, a, loc);
}
constexpr Value key_padding_mask(Value lengths, Value like, int key_axis = 1, int singleton_dims = 2,
                                 Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = key_axis;
  a.i[1] = singleton_dims;
  return ops::apply<KeyPaddingMaskOp>({lengths, like}, a, loc);
}

constexpr Value masked_fill(Value x, Value mask, double value, Loc loc = Loc::current()) {
  Attrs a;
  a.f[0] = value;
  return ops::apply<MaskedFillOp>({x, mask}, a, loc);
}

}  // namespace ctgrad
