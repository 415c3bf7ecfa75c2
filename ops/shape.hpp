// Shape ops: reshape (same elements, new dims), transpose (swap two axes), broadcast_to (x
// repeated to the shape of `like`, NumPy rules: a class token for every image of a batch).
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct ReshapeOp {
  static constexpr const char* name = "reshape";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (!(c.in[0].numel() == c.attr.shape.numel()))
      return ShapeResult::fail(Msg("cannot reshape ").add(c.in[0]).add(" (").add(c.in[0].numel())
                                   .add(" elements) to ").add(c.attr.shape).add(" (")
                                   .add(c.attr.shape.numel()).add(" elements)"));
    ShapeResult r;
    r.shape = c.attr.shape;
    r.dtype = c.dtype[0];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// attr.i[0], attr.i[1]: the two axes (negative counts from the end).
struct TransposeOp {
  static constexpr const char* name = "transpose";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape& x = c.in[0];
    int a = ops::norm_axis(c.attr.i[0], x.rank), b = ops::norm_axis(c.attr.i[1], x.rank);
    if (a < 0 || b < 0)
      return ShapeResult::fail(Msg("axes ").add(c.attr.i[0]).add(", ").add(c.attr.i[1]).add(" out of range for ").add(x));
    ShapeResult r;
    r.shape = x;
    r.shape[a] = x[b];
    r.shape[b] = x[a];
    r.dtype = c.dtype[0];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct BroadcastToOp {
  static constexpr const char* name = "broadcast_to";
  static constexpr int arity = 2;  // x, like (only its shape is read)
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape &x = c.in[0], &like = c.in[1];
    if (c.dtype[0] != DType::real) return ShapeResult::fail("x must be real");
    if (x.rank > like.rank) return ShapeResult::fail(Msg("x ").add(x).add(" has more dims than ").add(like));
    for (int i = 0; i < x.rank; ++i) {
      const Dim d = x[i], l = like[like.rank - x.rank + i];
      if (!(d == Dim(1)) && !(d == l))
        return ShapeResult::fail(Msg("x ").add(x).add(" does not broadcast to ").add(like).add(": dim ").add(i).add(" is ").add(d));
    }
    ShapeResult r;
    r.shape = like;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

constexpr Value reshape(Value x, Shape to, Loc loc = Loc::current()) {
  Attrs a;
  a.shape = to;
  return ops::apply<ReshapeOp>({x}, a, loc);
}
constexpr Value broadcast_to(Value x, Value like, Loc loc = Loc::current()) { return ops::apply<BroadcastToOp>({x, like}, {}, loc); }
constexpr Value transpose(Value x, int axis_a = -2, int axis_b = -1, Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = axis_a;
  a.i[1] = axis_b;
  return ops::apply<TransposeOp>({x}, a, loc);
}

}  // namespace ctgrad
