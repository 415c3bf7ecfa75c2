// Reductions: sum, mean, max, var over one axis (keepdim optional) or over all elements. Each is
// two ops: over an axis ("sum") and over every element ("sum_all").
//   max: the gradient goes to the first position holding the maximum.
//   var: divisor max(1, n - correction) (1: unbiased, as torch.var; 0: population); a single
//        element has variance 0 here, where torch.var gives NaN.
#pragma once
#include <type_traits>

#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct ReduceOptions {
  bool keepdim = false;
};
struct VarOptions {
  bool keepdim = false;
  int correction = 1;
};
// The options of the ops over one axis.
struct ReduceAxisOptions {
  int axis = -1;
  bool keepdim = false;
};
struct VarAxisOptions {
  int axis = -1;
  bool keepdim = false;
  int correction = 1;
};

namespace reduce {
enum Kind { sum, mean, max, var };
constexpr const char* names[] = {"sum", "mean", "max", "var"};
constexpr const char* all_names[] = {"sum_all", "mean_all", "max_all", "var_all"};
}  // namespace reduce

namespace ops {
constexpr ShapeResult reduce_all_shape(const ShapeCtx& c, bool keep) {
  if (!all_real(c)) return ShapeResult::fail("expects a real input");
  ShapeResult r;
  r.shape.rank = keep ? c.in[0].rank : 0;
  for (int i = 0; i < r.shape.rank; ++i) r.shape[i] = 1;
  return r;
}
constexpr ShapeResult reduce_axis_shape(const ShapeCtx& c, int axis, bool keep) {
  if (!all_real(c)) return ShapeResult::fail("expects a real input");
  const Shape& x = c.in[0];
  const int ax = norm_axis(axis, x.rank);
  if (ax < 0) return ShapeResult::fail(Msg("axis ").add(axis).add(" is out of range for ").add(x));
  ShapeResult r;
  for (int i = 0; i < x.rank; ++i) {
    if (i == ax && !keep) continue;
    r.shape[r.shape.rank++] = i == ax ? Dim(1) : x[i];
  }
  return r;
}
}  // namespace ops

template <reduce::Kind K>
struct ReduceAxisOp {
  using Options = std::conditional_t<K == reduce::var, VarAxisOptions, ReduceAxisOptions>;
  static constexpr const char* name = reduce::names[K];
  static constexpr int arity = 1;
  static constexpr unsigned saves = K == reduce::max ? kSaveInput(0) | kSaveOutput : K == reduce::var ? kSaveInput(0) : 0u;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const Options& o) { return ops::reduce_axis_shape(c, o.axis, o.keepdim); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

template <reduce::Kind K>
struct ReduceAllOp {
  using Options = std::conditional_t<K == reduce::var, VarOptions, ReduceOptions>;
  static constexpr const char* name = reduce::all_names[K];
  static constexpr int arity = 1;
  static constexpr unsigned saves = ReduceAxisOp<K>::saves;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const Options& o) { return ops::reduce_all_shape(c, o.keepdim); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

using SumOp = ReduceAxisOp<reduce::sum>;
using MeanOp = ReduceAxisOp<reduce::mean>;
using MaxOp = ReduceAxisOp<reduce::max>;
using VarOp = ReduceAxisOp<reduce::var>;
using SumAllOp = ReduceAllOp<reduce::sum>;
using MeanAllOp = ReduceAllOp<reduce::mean>;
using MaxAllOp = ReduceAllOp<reduce::max>;
using VarAllOp = ReduceAllOp<reduce::var>;

// Over all elements: a scalar (rank 0), or all-ones dims with keepdim.
constexpr Value sum(Value x, ReduceOptions o = {}, Loc loc = Loc::current()) { return ops::apply<SumAllOp>({x}, o, loc); }
constexpr Value sum(Value x, int axis, ReduceOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<SumOp>({x}, {.axis = axis, .keepdim = o.keepdim}, loc);
}
constexpr Value mean(Value x, ReduceOptions o = {}, Loc loc = Loc::current()) { return ops::apply<MeanAllOp>({x}, o, loc); }
constexpr Value mean(Value x, int axis, ReduceOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<MeanOp>({x}, {.axis = axis, .keepdim = o.keepdim}, loc);
}
constexpr Value max(Value x, ReduceOptions o = {}, Loc loc = Loc::current()) { return ops::apply<MaxAllOp>({x}, o, loc); }
constexpr Value max(Value x, int axis, ReduceOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<MaxOp>({x}, {.axis = axis, .keepdim = o.keepdim}, loc);
}
constexpr Value var(Value x, int axis, VarOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<VarOp>({x}, {.axis = axis, .keepdim = o.keepdim, .correction = o.correction}, loc);
}
constexpr Value var(Value x, VarOptions o = {}, Loc loc = Loc::current()) { return ops::apply<VarAllOp>({x}, o, loc); }

}  // namespace ctgrad
