// Selection ops for sparse layers (a mixture of experts' routing and combining):
//   top_k_indices(x, k): x real [..., N] -> int32 [..., k], the indices of the k largest values of
//     each row, largest first; equal values by lower index, a NaN below every number. No gradient.
//   take_along_last(x, idx): x real [..., N], idx int32 [..., k] (x's leading dims) -> [..., k],
//     x[..., idx[..., j]]; the gradient scatters back (added in index order: repeats add up).
//   top_k(x, k): {values, indices}, the two above: the gradient flows through the values only.
//   scatter_add_rows(src, idx, rows): src real [n, d], idx int32 [n] -> [rows, d], row r the sum of
//     the src rows i with idx[i] = r (in order of i); idx -1 drops the row (a token over an expert's
//     capacity). Its VJP is a gather of the output gradient's rows.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct TopKOptions {
  int k = 1;
};

struct TopKIndicesOp {
  using Options = TopKOptions;
  static constexpr const char* name = "top_k_indices";
  static constexpr int arity = 1;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c, const TopKOptions& o) {
    const Shape& x = c.in[0];
    if (c.dtype[0] != DType::real || x.rank < 1) return ShapeResult::fail(Msg("x must be real with rank >= 1, got ").add(x));
    if (!x.back(1).is_static()) return ShapeResult::fail(Msg("the last dim must be static, got ").add(x));
    if (o.k < 1 || o.k > x.back(1).coef) return ShapeResult::fail(Msg("k must be in [1, ").add(x.back(1)).add("], got ").add(o.k));
    ShapeResult r;
    r.shape = x;
    r.shape[x.rank - 1] = o.k;
    r.dtype = DType::index;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

struct TakeAlongLastOp {
  static constexpr const char* name = "take_along_last";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape &x = c.in[0], &idx = c.in[1];
    if (c.dtype[0] != DType::real || x.rank < 1) return ShapeResult::fail(Msg("x must be real with rank >= 1, got ").add(x));
    if (c.dtype[1] != DType::index || idx.rank != x.rank) return ShapeResult::fail(Msg("idx must be int32 of x's rank, got ").add(ops::shapes_msg(c)));
    for (int i = 0; i + 1 < x.rank; ++i)
      if (!(x[i] == idx[i])) return ShapeResult::fail(Msg("leading dim ").add(i).add(" differs in ").add(ops::shapes_msg(c)));
    ShapeResult r;
    r.shape = idx;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct ScatterAddRowsOptions {
  Dim rows = 1;
};

struct ScatterAddRowsOp {
  using Options = ScatterAddRowsOptions;
  static constexpr const char* name = "scatter_add_rows";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(1);
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const ScatterAddRowsOptions& o) {
    const Shape &src = c.in[0], &idx = c.in[1];
    if (c.dtype[0] != DType::real || src.rank != 2) return ShapeResult::fail(Msg("src must be real [n, d], got ").add(src));
    if (c.dtype[1] != DType::index || idx.rank != 1 || !(idx[0] == src[0]))
      return ShapeResult::fail(Msg("idx must be int32 [n] for src [n, d], got ").add(ops::shapes_msg(c)));
    ShapeResult r;
    r.shape = Shape{o.rows, src[1]};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

constexpr Value top_k_indices(Value x, int k, Loc loc = Loc::current()) { return ops::apply<TopKIndicesOp>({x}, {.k = k}, loc); }
constexpr Value take_along_last(Value x, Value idx, Loc loc = Loc::current()) { return ops::apply<TakeAlongLastOp>({x, idx}, {}, loc); }

struct TopK {
  Value values, indices;
};
constexpr TopK top_k(Value x, int k, Loc loc = Loc::current()) {
  const Value idx = top_k_indices(x, k, loc);
  return {take_along_last(x, idx, loc), idx};
}

constexpr Value scatter_add_rows(Value src, Value idx, Dim rows, Loc loc = Loc::current()) {
  return ops::apply<ScatterAddRowsOp>({src, idx}, {.rows = rows}, loc);
}

}  // namespace ctgrad
