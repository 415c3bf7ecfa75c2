// Position ops.
//   sinusoidal_positions(like): [T, d] with T = like's axis attr.i[0], d static (attr.i[1]);
//   sinusoidal_positions_at(positions [T]): the rows at those positions (attr.i[2] = 1; decoding):
//     pe[p, 2i] = sin(p * w_i), pe[p, 2i+1] = cos(p * w_i), w_i = exp(-2i ln(10000) / d) (log space,
//     as in the paper's reference code); no gradient.
//   prefix_rows(table [L, d], like): the first T rows, T = like's axis attr.i[0]; T > L is a runtime
//     error naming both (a sequence longer than the positions the model was built for).
//   relative_position_bias(table [buckets, heads], q, k): T5's bias [1, heads, Tq, Tk] from bucketed
//     relative positions (attr.i[0] buckets, attr.i[1] max distance, attr.i[2] bidirectional).
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct SinusoidalPositionsOp {
  static constexpr const char* name = "sinusoidal_positions";
  static constexpr int arity = 1;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const int ax = ops::norm_axis(c.attr.i[0], c.in[0].rank);
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(c.attr.i[0]).add(" out of range for ").add(c.in[0]));
    if (c.attr.i[1] < 2 || c.attr.i[1] % 2) return ShapeResult::fail(Msg("d must be even and >= 2, got ").add(c.attr.i[1]));
    if (c.attr.i[2] && (c.dtype[0] != DType::index || c.in[0].rank != 1))
      return ShapeResult::fail(Msg("positions must be a 1-D int32 tensor, got ").add(c.in[0]));
    ShapeResult r;
    r.shape = Shape{c.in[0][ax], Dim(c.attr.i[1])};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

struct PrefixRowsOp {
  static constexpr const char* name = "prefix_rows";
  static constexpr int arity = 2;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape& t = c.in[0];
    const int ax = ops::norm_axis(c.attr.i[0], c.in[1].rank);
    if (c.dtype[0] != DType::real || t.rank != 2) return ShapeResult::fail(Msg("table must be real [L, d], got ").add(t));
    if (ax < 0) return ShapeResult::fail(Msg("axis ").add(c.attr.i[0]).add(" out of range for ").add(c.in[1]));
    const Dim len = c.in[1][ax];
    if (len.is_static() && t[0].is_static() && len.coef > t[0].coef)
      return ShapeResult::fail(Msg("sequence length ").add(len).add(" exceeds the table's ").add(t[0]).add(" rows"));
    ShapeResult r;
    r.shape = Shape{len, t[1]};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct RelativePositionBiasOp {
  static constexpr const char* name = "relative_position_bias";
  static constexpr int arity = 3;  // table [buckets, heads], q [..., Tq, d], k [..., Tk, d] (shapes only)
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape &t = c.in[0], &q = c.in[1], &k = c.in[2];
    if (c.dtype[0] != DType::real || t.rank != 2 || !(t[0] == Dim(c.attr.i[0])))
      return ShapeResult::fail(Msg("table must be [").add(c.attr.i[0]).add(", heads], got ").add(t));
    if (q.rank < 2 || k.rank < 2) return ShapeResult::fail("q and k need rank >= 2");
    if (c.attr.i[1] <= 0) return ShapeResult::fail("max distance must be positive");
    ShapeResult r;
    r.shape = Shape{1, t[1], q.back(2), k.back(2)};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

constexpr Value sinusoidal_positions(Value like, int d, int seq_axis = 1, Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = seq_axis, a.i[1] = d;
  return ops::apply<SinusoidalPositionsOp>({like}, a, loc);
}
constexpr Value sinusoidal_positions_at(Value positions, int d, Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = 0, a.i[1] = d, a.i[2] = 1;
  return ops::apply<SinusoidalPositionsOp>({positions}, a, loc);
}
constexpr Value prefix_rows(Value table, Value like, int seq_axis = 1, Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = seq_axis;
  return ops::apply<PrefixRowsOp>({table, like}, a, loc);
}
struct RelativeBiasOptions {
  int buckets = 32, max_distance = 128;
  bool bidirectional = true;  // encoder: true; decoder self-attention: false
};
constexpr Value relative_position_bias(Value table, Value q, Value k, RelativeBiasOptions o = {}, Loc loc = Loc::current()) {
  Attrs a;
  a.i[0] = o.buckets, a.i[1] = o.max_distance, a.i[2] = o.bidirectional;
  return ops::apply<RelativePositionBiasOp>({table, q, k}, a, loc);
}

// T5's bucket of a relative position (key - query), as in Mesh TensorFlow / HF T5.
int relative_position_bucket(std::int64_t relative, bool bidirectional, int buckets, int max_distance);

}  // namespace ctgrad
