// Masks, and filling by a mask. Masks are int32 (index) tensors of 0 and 1, ctgrad's booleans:
// attention() selects with them, where a real tensor in the same place would add.
//   masked_fill(x, mask, value): x where mask != 0, value elsewhere; mask broadcasts to x
//     (a key-padding mask [Batch,1,1,SeqKV] over attention scores [Batch,heads,Seq,SeqKV]).
//   causal_mask(g, Tq, Tk[, window]): [Tq, Tk], 1 where key j <= query i + (Tk - Tq) (aligned at
//     the end, as in incremental decoding where the keys hold the past); with a window w > 0, also
//     j > i + (Tk - Tq) - w: each query sees itself and the w - 1 keys before it (Mistral's
//     sliding window; attention's `window` option does the same without the mask).
//   key_padding_mask(lengths, Tk): [Batch, 1, ..., 1, Tk] from lengths [Batch], 1 where j < length.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct MaskedFillOptions {
  Real value = 0;
};

struct MaskedFillOp {
  using Options = MaskedFillOptions;
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

struct CausalMaskOptions {
  Dim queries = 1, keys = 1;
  int window = 0;  // 0: unlimited
};

struct CausalMaskOp {
  using Options = CausalMaskOptions;
  static constexpr const char* name = "causal_mask";
  static constexpr int arity = 0;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx&, const CausalMaskOptions& o) {
    if (o.window < 0) return ShapeResult::fail(Msg("window must be >= 0 (0: unlimited), got ").add(o.window));
    ShapeResult r;
    r.shape = Shape{o.queries, o.keys};
    r.dtype = DType::index;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

struct KeyPaddingMaskOptions {
  Dim keys = 1;
  int singleton_dims = 2;  // between Batch and the keys: 2 for scores [Batch, heads, Tq, Tk]
};

struct KeyPaddingMaskOp {
  using Options = KeyPaddingMaskOptions;
  static constexpr const char* name = "key_padding_mask";
  static constexpr int arity = 1;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c, const KeyPaddingMaskOptions& o) {
    const Shape& len = c.in[0];
    if (c.dtype[0] != DType::index || len.rank != 1) return ShapeResult::fail(Msg("lengths must be int32 [Batch], got ").add(len));
    if (o.singleton_dims < 0 || o.singleton_dims > kMaxRank - 2) return ShapeResult::fail("bad number of singleton dims");
    ShapeResult r;
    r.shape.rank = o.singleton_dims + 2;
    r.shape[0] = len[0];
    for (int i = 1; i <= o.singleton_dims; ++i) r.shape[i] = 1;
    r.shape[r.shape.rank - 1] = o.keys;
    r.dtype = DType::index;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

// [queries, keys] (default: keys = queries); `s` names the graph (any scope of it).
constexpr Value causal_mask(const Scope& s, Dim queries, Dim keys, Loc loc = Loc::current()) {
  return s.apply<CausalMaskOp>({}, {.queries = queries, .keys = keys}, loc);
}
constexpr Value causal_mask(const Scope& s, Dim queries, Dim keys, int window, Loc loc = Loc::current()) {
  return s.apply<CausalMaskOp>({}, {.queries = queries, .keys = keys, .window = window}, loc);
}
constexpr Value causal_mask(const Scope& s, Dim length, Loc loc = Loc::current()) {
  return s.apply<CausalMaskOp>({}, {.queries = length, .keys = length}, loc);
}
constexpr Value key_padding_mask(Value lengths, Dim keys, int singleton_dims = 2, Loc loc = Loc::current()) {
  return ops::apply<KeyPaddingMaskOp>({lengths}, {.keys = keys, .singleton_dims = singleton_dims}, loc);
}

constexpr Value masked_fill(Value x, Value mask, Real value, Loc loc = Loc::current()) {
  return ops::apply<MaskedFillOp>({x, mask}, {.value = value}, loc);
}

}  // namespace ctgrad
