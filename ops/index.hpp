// Indexing ops: permute, concat, slice (and split), index_select, embedding.
#pragma once
#include <array>

#include <ctgrad/ops/common.hpp>

namespace ctgrad {

// attr.shape holds the permutation: output axis i is input axis attr.shape[i].
struct PermuteOp {
  static constexpr const char* name = "permute";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape& x = c.in[0];
    const Shape& p = c.attr.shape;
    if (p.rank != x.rank) return ShapeResult::fail(Msg("permutation of ").add(p.rank).add(" axes for ").add(x));
    bool seen[kMaxRank] = {};
    ShapeResult r;
    r.shape.rank = x.rank;
    r.dtype = c.dtype[0];
    for (int i = 0; i < p.rank; ++i) {
      const std::int64_t ax = p[i].coef;
      if (!p[i].is_static() || ax < 0 || ax >= x.rank || seen[ax])
        return ShapeResult::fail(Msg("not a permutation of the axes of ").add(x).add(": ").add(p));
      seen[ax] = true;
      r.shape[i] = x[int(ax)];
    }
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// Concatenation of 1 to 4 tensors along attr.i[0]; the other dims must agree.
struct ConcatOp {
  static constexpr const char* name = "concat";
  static constexpr int arity = -1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape& x = c.in[0];
    const int ax = ops::norm_axis(c.attr.i[0], x.rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(c.attr.i[0]).add(" out of range for ").add(x));
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

// x[..., start : start + length, ...] along attr.i[0]; attr.i[1] = start, attr.i[2] = length.
struct SliceOp {
  static constexpr const char* name = "slice";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape& x = c.in[0];
    const int ax = ops::norm_axis(c.attr.i[0], x.rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(c.attr.i[0]).add(" out of range for ").add(x));
    const std::int64_t start = c.attr.i[1], len = c.attr.i[2];
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

// x with its last n entries along attr.i[0] replaced by tail (n = tail's length there): the write
// of a key/value cache in incremental decoding, where x holds the past plus room for the new rows.
struct OverwriteTailOp {
  static constexpr const char* name = "overwrite_tail";
  static constexpr int arity = 2;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape &x = c.in[0], &t = c.in[1];
    const int ax = ops::norm_axis(c.attr.i[0], x.rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(c.attr.i[0]).add(" out of range for ").add(x));
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

// x gathered along attr.i[0] at int32 indices idx [n]: the axis becomes n long.
struct IndexSelectOp {
  static constexpr const char* name = "index_select";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape &x = c.in[0], &idx = c.in[1];
    const int ax = ops::norm_axis(c.attr.i[0], x.rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(c.attr.i[0]).add(" out of range for ").add(x));
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

constexpr Value permute(Value x, Shape perm, Loc loc = Loc::current()) {
  Attrs a;
  a.shape = perm;
  return ops::apply<PermuteOp>({x}, a, loc);
}
constexpr Value concat(std::initializer_list<Value> xs, int axis, Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = axis;
  return Scope{xs.begin()->b, {}}.apply<ConcatOp>(xs, a, loc);
}
constexpr Value slice(Value x, int axis, std::int64_t start, std::int64_t length, Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = axis, a.i[1] = start, a.i[2] = length;
  return ops::apply<SliceOp>({x}, a, loc);
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
  Attrs a;
  a.i[0] = axis;
  return ops::apply<OverwriteTailOp>({x, tail}, a, loc);
}
constexpr Value index_select(Value x, int axis, Value indices, Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = axis;
  return ops::apply<IndexSelectOp>({x, indices}, a, loc);
}
constexpr Value embedding(Value table, Value ids, Loc loc = Loc::current()) {
  return ops::apply<EmbeddingOp>({table, ids}, {}, loc);
}

}  // namespace ctgrad
