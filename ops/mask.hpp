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

constexpr Value masked_fill(Value x, Value mask, double value, Loc loc = Loc::current()) {
  Attrs a;
  a.f[0] = value;
  return ops::apply<MaskedFillOp>({x, mask}, a, loc);
}

}  // namespace ctgrad
