// Position ops.
//   sinusoidal_positions(g, T, d): [T, d], rows 0..T-1 of the paper's encoding;
//   sinusoidal_positions_at(positions [T], d): the rows at those positions (decoding):
//     pe[p, 2i] = sin(p * w_i), pe[p, 2i+1] = cos(p * w_i), w_i = exp(-2i ln(10000) / d) (log space,
//     as in the paper's reference code); no gradient.
//   prefix_rows(table [L, d], T): the first T rows; T > L is a runtime error naming both (a
//     sequence longer than the positions the model was built for).
//   relative_position_bias(table [buckets, heads], Tq, Tk): T5's bias [1, heads, Tq, Tk] from
//     bucketed relative positions (key - query). The queries are the last Tq of the Tk positions
//     (query i at Tk - Tq + i), as in a decoding step over cached keys; Tq = Tk in training.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct SinusoidalPositionsOptions {
  Dim length = 1;
  int d = 2;
};

struct SinusoidalPositionsOp {
  using Options = SinusoidalPositionsOptions;
  static constexpr const char* name = "sinusoidal_positions";
  static constexpr int arity = 0;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx&, const SinusoidalPositionsOptions& o) {
    if (o.d < 2 || o.d % 2) return ShapeResult::fail(Msg("d must be even and >= 2, got ").add(o.d));
    ShapeResult r;
    r.shape = Shape{o.length, Dim(o.d)};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

struct SinusoidalPositionsAtOptions {
  int d = 2;
};

struct SinusoidalPositionsAtOp {
  using Options = SinusoidalPositionsAtOptions;
  static constexpr const char* name = "sinusoidal_positions_at";
  static constexpr int arity = 1;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c, const SinusoidalPositionsAtOptions& o) {
    if (o.d < 2 || o.d % 2) return ShapeResult::fail(Msg("d must be even and >= 2, got ").add(o.d));
    if (c.dtype[0] != DType::index || c.in[0].rank != 1)
      return ShapeResult::fail(Msg("positions must be a 1-D int32 tensor, got ").add(c.in[0]));
    ShapeResult r;
    r.shape = Shape{c.in[0][0], Dim(o.d)};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

struct PrefixRowsOptions {
  Dim rows = 1;
};

struct PrefixRowsOp {
  using Options = PrefixRowsOptions;
  static constexpr const char* name = "prefix_rows";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c, const PrefixRowsOptions& o) {
    const Shape& t = c.in[0];
    if (c.dtype[0] != DType::real || t.rank != 2) return ShapeResult::fail(Msg("table must be real [L, d], got ").add(t));
    if (o.rows.is_static() && t[0].is_static() && o.rows.coef > t[0].coef)
      return ShapeResult::fail(Msg("sequence length ").add(o.rows).add(" exceeds the table's ").add(t[0]).add(" rows"));
    ShapeResult r;
    r.shape = Shape{o.rows, t[1]};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct RelativeBiasOptions {
  int buckets = 32, max_distance = 128;
  bool bidirectional = true;  // encoder: true; decoder self-attention: false
};

struct RelativePositionBiasOptions {
  Dim queries = 1, keys = 1;
  RelativeBiasOptions relative{};
};

struct RelativePositionBiasOp {
  using Options = RelativePositionBiasOptions;
  static constexpr const char* name = "relative_position_bias";
  static constexpr int arity = 1;  // table [buckets, heads]
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c, const RelativePositionBiasOptions& o) {
    const Shape& t = c.in[0];
    if (c.dtype[0] != DType::real || t.rank != 2 || !(t[0] == Dim(o.relative.buckets)))
      return ShapeResult::fail(Msg("table must be [").add(o.relative.buckets).add(", heads], got ").add(t));
    if (o.relative.max_distance <= 0) return ShapeResult::fail("max distance must be positive");
    if (o.relative.buckets < (o.relative.bidirectional ? 4 : 2))  // half of them exact, at least one
      return ShapeResult::fail(Msg("needs at least ").add(o.relative.bidirectional ? 4 : 2).add(" buckets, got ").add(o.relative.buckets));
    ShapeResult r;
    r.shape = Shape{1, t[1], o.queries, o.keys};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// [length, d]; `s` names the graph (any scope of it).
constexpr Value sinusoidal_positions(const Scope& s, Dim length, int d, Loc loc = Loc::current()) {
  return s.apply<SinusoidalPositionsOp>({}, {.length = length, .d = d}, loc);
}
constexpr Value sinusoidal_positions_at(Value positions, int d, Loc loc = Loc::current()) {
  return ops::apply<SinusoidalPositionsAtOp>({positions}, {.d = d}, loc);
}
constexpr Value prefix_rows(Value table, Dim rows, Loc loc = Loc::current()) {
  return ops::apply<PrefixRowsOp>({table}, {.rows = rows}, loc);
}
constexpr Value relative_position_bias(Value table, Dim queries, Dim keys, RelativeBiasOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<RelativePositionBiasOp>({table}, {.queries = queries, .keys = keys, .relative = o}, loc);
}

// T5's bucket of a relative position (key - query), as in Mesh TensorFlow / HF T5.
int relative_position_bucket(std::int64_t relative, bool bidirectional, int buckets, int max_distance);

}  // namespace ctgrad
