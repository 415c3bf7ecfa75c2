// Helpers shared by op declarations: shape rules and the Value-level apply shortcut.
#pragma once
#include <ctgrad/graph/builder.hpp>

namespace ctgrad::ops {

// Applies Op to values of one graph; the node is named after no scope (errors carry file:line).
template <class Op>
constexpr Value apply(std::initializer_list<Value> in, const options_t<Op>& o, const Loc& loc) {
  return Scope{in.begin()->b, {}, loc}.template apply<Op>(in, o, loc);
}

constexpr Msg shapes_msg(const ShapeCtx& c) {
  Msg m;
  for (int k = 0; k < c.n_in; ++k) {
    if (k) m.add(" and ");
    m.add(c.in[k]);
  }
  return m;
}

constexpr bool all_real(const ShapeCtx& c) {
  for (int k = 0; k < c.n_in; ++k)
    if (c.dtype[k] != DType::real) return false;
  return true;
}

// NumPy broadcasting of two shapes (right-aligned; a dim of 1 stretches).
constexpr ShapeResult broadcast_shape(const ShapeCtx& c) {
  if (!all_real(c)) return ShapeResult::fail(Msg("expects real inputs, got an index tensor"));
  const Shape &a = c.in[0], &b = c.in[1];
  ShapeResult r;
  r.shape.rank = a.rank > b.rank ? a.rank : b.rank;
  for (int i = 0; i < r.shape.rank; ++i) {
    int ia = a.rank - r.shape.rank + i, ib = b.rank - r.shape.rank + i;
    Dim da = ia >= 0 ? a[ia] : Dim(1), db = ib >= 0 ? b[ib] : Dim(1);
    if (da == db || db == Dim(1))
      r.shape[i] = da;
    else if (da == Dim(1))
      r.shape[i] = db;
    else
      return ShapeResult::fail(Msg("cannot broadcast ").add(a).add(" with ").add(b).add(": dim ")
                                   .add(i).add(" is ").add(da).add(" vs ").add(db));
  }
  return r;
}

constexpr ShapeResult same_shape(const ShapeCtx& c) {
  if (!all_real(c)) return ShapeResult::fail(Msg("expects real inputs, got an index tensor"));
  ShapeResult r;
  r.shape = c.in[0];
  return r;
}

// sqrt usable in constant evaluation (std::sqrt is not constexpr in C++20): Newton's method.
constexpr double const_sqrt(double v) {
  if (v <= 0) return 0;
  double r = v > 1 ? v : 1;
  for (int i = 0; i < 100; ++i) r = 0.5 * (r + v / r);
  return r;
}

// Normalises a possibly negative axis; -1 when out of range.
constexpr int norm_axis(std::int64_t axis, int rank) {
  std::int64_t a = axis < 0 ? axis + rank : axis;
  return a >= 0 && a < rank ? int(a) : -1;
}

}  // namespace ctgrad::ops
