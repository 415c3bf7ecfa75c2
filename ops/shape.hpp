// Shape ops: reshape (same elements, new dims), transpose (swap two axes), broadcast_to (x
// repeated to a shape, NumPy rules: a class token for every image of a batch, [Batch, 1, d]).
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct ReshapeOptions {
  Shape to;
};

struct ReshapeOp {
  using Options = ReshapeOptions;
  static constexpr const char* name = "reshape";
  static constexpr int arity = 1;
  static constexpr bool view = true;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const ReshapeOptions& o) {
    if (!(c.in[0].numel() == o.to.numel()))
      return ShapeResult::fail(Msg("cannot reshape ").add(c.in[0]).add(" (").add(c.in[0].numel())
                                   .add(" elements) to ").add(o.to).add(" (")
                                   .add(o.to.numel()).add(" elements)"));
    ShapeResult r;
    r.shape = o.to;
    r.dtype = c.dtype[0];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// The two axes to swap (negative counts from the end).
struct TransposeOptions {
  int axis_a = -2, axis_b = -1;
};

struct TransposeOp {
  using Options = TransposeOptions;
  static constexpr const char* name = "transpose";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const TransposeOptions& o) {
    const Shape& x = c.in[0];
    int a = ops::norm_axis(o.axis_a, x.rank), b = ops::norm_axis(o.axis_b, x.rank);
    if (a < 0 || b < 0)
      return ShapeResult::fail(Msg("axes ").add(o.axis_a).add(", ").add(o.axis_b).add(" out of range for ").add(x));
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

struct BroadcastToOptions {
  Shape to;
};

struct BroadcastToOp {
  using Options = BroadcastToOptions;
  static constexpr const char* name = "broadcast_to";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const BroadcastToOptions& o) {
    const Shape &x = c.in[0], &like = o.to;
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

constexpr Value reshape(Value x, Shape to, Loc loc = Loc::current()) { return ops::apply<ReshapeOp>({x}, {.to = to}, loc); }
constexpr Value broadcast_to(Value x, Shape to, Loc loc = Loc::current()) { return ops::apply<BroadcastToOp>({x}, {.to = to}, loc); }
constexpr Value transpose(Value x, int axis_a = -2, int axis_b = -1, Loc loc = Loc::current()) {
  return ops::apply<TransposeOp>({x}, {.axis_a = axis_a, .axis_b = axis_b}, loc);
}

}  // namespace ctgrad
