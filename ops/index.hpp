// Indexing ops: permute, concat, slice (and split), index_select, embedding.
#pragma once
#include <array>

#include <ctgrad/ops/common.hpp>

namespace ctgrad {

// Output axis i is input axis axes[i].
struct PermuteOptions {
  int rank = 0;
  std::array<int, kMaxRank> axes{};
};

struct PermuteOp {
  using Options = PermuteOptions;
  static constexpr const char* name = "permute";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const PermuteOptions& p) {
    const Shape& x = c.in[0];
    auto perm = [&] {
      Msg m("(");
      for (int i = 0; i < p.rank; ++i) (i ? m.add(", ") : m).add(p.axes[std::size_t(i)]);
      return m.add(")");
    };
    if (p.rank != x.rank) return ShapeResult::fail(Msg("permutation ").add(perm()).add(" of ").add(p.rank).add(" axes for ").add(x));
    bool seen[kMaxRank] = {};
    ShapeResult r;
    r.shape.rank = x.rank;
    r.dtype = c.dtype[0];
    for (int i = 0; i < p.rank; ++i) {
      const int ax = p.axes[std::size_t(i)];
      if (ax < 0 || ax >= x.rank || seen[ax]) return ShapeResult::fail(Msg("not a permutation of the axes of ").add(x).add(": ").add(perm()));
      seen[ax] = true;
      r.shape[i] = x[ax];
    }
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct AxisOptions {
  int axis = 0;
};

// Concatenation of 1 to kMaxInputs tensors along an axis; the other dims must agree.
struct ConcatOp {
  using Options = AxisOptions;
  static constexpr const char* name = "concat";
  static constexpr int arity = -1;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = (1u << kMaxInputs) - 1;
  static constexpr ShapeResult shape(const ShapeCtx& c, const AxisOptions& o) {
    const Shape& x = c.in[0];
    const int ax = ops::norm_axis(o.axis, x.rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(o.axis).add(" out of range for ").add(x));
    ShapeResult r;
    r.shape = x;
    r.dtype = c.dtype[0];
    for (int k = 1; k < c.n_in; ++k) {
      const Shape& y = c.in[k];
      if (y.rank != x.rank || c.dtype[k] != c.dtype[0])
        return ShapeResult::fail(Msg("inputs differ in rank or dtype: ").add(ops::shapes_msg(c)));
      for (int i = 0; i < x.rank; ++i)
        if (i != ax && !(x[i] == y[i]))
          return ShapeResult::fail(Msg("dim ").add(i).add(" differs: ").add(x[i]).add(" vs ").add(y[i]).add(" in ")
                                       .add(ops::shapes_msg(c)));
      if (y[ax].exp != r.shape[ax].exp)
        return ShapeResult::fail(Msg("cannot add dims ").add(r.shape[ax]).add(" and ").add(y[ax]).add(" along axis ").add(ax));
      r.shape[ax].coef += y[ax].coef;
    }
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct SliceOptions {
  int axis = 0;
  std::int64_t start = 0, length = 1;
};

// x[..., start : start + length, ...] along an axis.
struct SliceOp {
  using Options = SliceOptions;
  static constexpr const char* name = "slice";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const SliceOptions& o) {
    const Shape& x = c.in[0];
    const int ax = ops::norm_axis(o.axis, x.rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(o.axis).add(" out of range for ").add(x));
    const std::int64_t start = o.start, len = o.length;
    if (start < 0 || len < 1 || (x[ax].is_static() && start + len > x[ax].coef))
      return ShapeResult::fail(Msg("range [").add(start).add(", ").add(start + len).add(") does not fit dim ").add(ax)
                                   .add(" of ").add(x));
    ShapeResult r;
    r.shape = x;
    r.shape[ax] = len;
    r.dtype = c.dtype[0];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// x with its last n entries along an axis replaced by tail (n = tail's length there): the write
// of a key/value cache in incremental decoding, where x holds the past plus room for the new rows.
struct OverwriteTailOp {
  using Options = AxisOptions;
  static constexpr const char* name = "overwrite_tail";
  static constexpr int arity = 2;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c, const AxisOptions& o) {
    const Shape &x = c.in[0], &t = c.in[1];
    const int ax = ops::norm_axis(o.axis, x.rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(o.axis).add(" out of range for ").add(x));
    if (t.rank != x.rank || c.dtype[0] != c.dtype[1])
      return ShapeResult::fail(Msg("x and tail differ in rank or dtype: ").add(ops::shapes_msg(c)));
    for (int i = 0; i < x.rank; ++i)
      if (i != ax && !(x[i] == t[i]))
        return ShapeResult::fail(Msg("dim ").add(i).add(" differs: ").add(x[i]).add(" vs ").add(t[i]).add(" in ").add(ops::shapes_msg(c)));
    if (x[ax].is_static() && t[ax].is_static() && t[ax].coef > x[ax].coef)
      return ShapeResult::fail(Msg("tail ").add(t).add(" is longer than x ").add(x).add(" along axis ").add(ax));
    ShapeResult r;
    r.shape = x;
    r.dtype = c.dtype[0];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// x gathered along an axis at int32 indices idx [n]: the axis becomes n long.
struct IndexSelectOp {
  using Options = AxisOptions;
  static constexpr const char* name = "index_select";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c, const AxisOptions& o) {
    const Shape &x = c.in[0], &idx = c.in[1];
    const int ax = ops::norm_axis(o.axis, x.rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(o.axis).add(" out of range for ").add(x));
    if (c.dtype[1] != DType::index || idx.rank != 1)
      return ShapeResult::fail(Msg("indices must be a 1-D int32 tensor, got ").add(idx));
    ShapeResult r;
    r.shape = x;
    r.shape[ax] = idx[0];
    r.dtype = c.dtype[0];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// table [V, D] gathered at int32 ids [...] -> [..., D]; backward scatter-adds into the table.
struct EmbeddingOp {
  static constexpr const char* name = "embedding";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape &t = c.in[0], &ids = c.in[1];
    if (c.dtype[0] != DType::real || t.rank != 2) return ShapeResult::fail(Msg("table must be real [V, D], got ").add(t));
    if (c.dtype[1] != DType::index) return ShapeResult::fail("ids must be int32 (index) values");
    if (ids.rank + 1 > kMaxRank) return ShapeResult::fail(Msg("ids of rank ").add(ids.rank).add(" are too many dims"));
    ShapeResult r;
    r.shape = ids;
    r.shape[r.shape.rank++] = t[1];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

constexpr Value permute(Value x, std::initializer_list<int> axes, Loc loc = Loc::current()) {
  PermuteOptions o;
  for (int a : axes)
    if (o.rank < kMaxRank) o.axes[std::size_t(o.rank++)] = a;
  return ops::apply<PermuteOp>({x}, o, loc);
}
constexpr Value concat(std::initializer_list<Value> xs, int axis, Loc loc = Loc::current()) {
  return ops::apply<ConcatOp>(xs, {.axis = axis}, loc);
}
constexpr Value slice(Value x, int axis, std::int64_t start, std::int64_t length, Loc loc = Loc::current()) {
  return ops::apply<SliceOp>({x}, {.axis = axis, .start = start, .length = length}, loc);
}
// N equal parts along a static axis (e.g. a fused QKV projection into q, k, v).
template <int N>
constexpr std::array<Value, N> split(Value x, int axis, Loc loc = Loc::current()) {
  const Shape s = x.shape();
  const int ax = ops::norm_axis(axis, s.rank);
  // Checked before the slices, so that this is the error reported (the builder keeps the first).
  if (ax >= 0 && (!s[ax].is_static() || s[ax].coef % N))
    x.b->fail(Msg("split: dim ").add(s[ax]).add(" of ").add(s).add(" is not a static multiple of ").add(N), loc);
  const std::int64_t len = ax >= 0 && s[ax].coef / N > 0 ? s[ax].coef / N : 1;
  std::array<Value, N> parts{};
  for (int i = 0; i < N; ++i) parts[std::size_t(i)] = slice(x, axis, i * len, len, loc);
  return parts;
}
constexpr Value overwrite_tail(Value x, Value tail, int axis, Loc loc = Loc::current()) {
  return ops::apply<OverwriteTailOp>({x, tail}, {.axis = axis}, loc);
}
constexpr Value index_select(Value x, int axis, Value indices, Loc loc = Loc::current()) {
  return ops::apply<IndexSelectOp>({x, indices}, {.axis = axis}, loc);
}
constexpr Value embedding(Value table, Value ids, Loc loc = Loc::current()) {
  return ops::apply<EmbeddingOp>({table, ids}, {}, loc);
}

}  // namespace ctgrad
