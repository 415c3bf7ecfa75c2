// Reductions: sum, mean, max, var over one axis (keepdim optional) or over all elements.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

namespace ops {
// attr.i: [0] axis, [1] keepdim, [2] over all axes
constexpr ShapeResult reduce_shape(const ShapeCtx& c) {
  if (!all_real(c)) return ShapeResult::fail("expects a real input");
  const Shape& x = c.in[0];
  const bool keep = c.attr.i[1] != 0, all = c.attr.i[2] != 0;
  ShapeResult r;
  if (all) {
    r.shape.rank = keep ? x.rank : 0;
    for (int i = 0; i < r.shape.rank; ++i) r.shape[i] = 1;
    return r;
  }
  int ax = norm_axis(c.attr.i[0], x.rank);
  if (ax < 0) return ShapeResult::fail(Msg("axis ").add(c.attr.i[0]).add(" is out of range for ").add(x));
  for (int i = 0; i < x.rank; ++i) {
    if (i == ax && !keep) continue;
    r.shape[r.shape.rank++] = i == ax ? Dim(1) : x[i];
  }
  return r;
}
}  // namespace ops

struct SumOp {
  static constexpr const char* name = "sum";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::reduce_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

struct MeanOp {
  static constexpr const char* name = "mean";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::reduce_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

// Maximum; the gradient goes to the first position holding it.
struct MaxOp {
  static constexpr const char* name = "max";
  static constexpr int arity = 1;
  static constexpr unsigned saves = kSaveInput(0) | kSaveOutput;
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::reduce_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

// Variance with attr.i[3] = correction (1: unbiased, as torch.var; 0: population). The divisor
// is max(1, n - correction): a single element has variance 0 here, where torch.var gives NaN.
struct VarOp {
  static constexpr const char* name = "var";
  static constexpr int arity = 1;
  static constexpr unsigned saves = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::reduce_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

struct ReduceOptions {
  bool keepdim = false;
};
struct VarOptions {
  bool keepdim = false;
  int correction = 1;
};

namespace ops {
constexpr Attrs reduce_attrs(std::int64_t axis, bool keep, bool all) {
  Attrs a;
  a.i[0] = axis;
  a.i[1] = keep;
  a.i[2] = all;
  return a;
}
}  // namespace ops

// Over all elements: a scalar (rank 0), or all-ones dims with keepdim.
constexpr Value sum(Value x, ReduceOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<SumOp>({x}, ops::reduce_attrs(0, o.keepdim, true), loc);
}
constexpr Value sum(Value x, int axis, ReduceOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<SumOp>({x}, ops::reduce_attrs(axis, o.keepdim, false), loc);
}
constexpr Value mean(Value x, ReduceOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<MeanOp>({x}, ops::reduce_attrs(0, o.keepdim, true), loc);
}
constexpr Value mean(Value x, int axis, ReduceOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<MeanOp>({x}, ops::reduce_attrs(axis, o.keepdim, false), loc);
}

constexpr Value max(Value x, ReduceOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<MaxOp>({x}, ops::reduce_attrs(0, o.keepdim, true), loc);
}
constexpr Value max(Value x, int axis, ReduceOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<MaxOp>({x}, ops::reduce_attrs(axis, o.keepdim, false), loc);
}
constexpr Value var(Value x, int axis, VarOptions o = {}, Loc loc = Loc::current()) {
  Attrs a = ops::reduce_attrs(axis, o.keepdim, false);
  a.i[3] = o.correction;
  return ops::apply<VarOp>({x}, a, loc);
}
constexpr Value var(Value x, VarOptions o = {}, Loc loc = Loc::current()) {
  Attrs a = ops::reduce_attrs(0, o.keepdim, true);
  a.i[3] = o.correction;
  return ops::apply<VarOp>({x}, a, loc);
}

}  // namespace ctgrad
