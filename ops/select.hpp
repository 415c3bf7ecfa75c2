// Selection ops for sparse layers (a mixture of experts' routing and combining):
//   top_k_indices(x, k): x real [..., N] -> int32 [..., k], the indices of the k largest values of
//     each row, largest first; equal values by lower index, a NaN below every number. No gradient.
//   take_along_last(x, idx): x real [..., N], idx int32 [..., k] (x's leading dims) -> [..., k],
//     x[..., idx[..., j]]; the gradient scatters back (added in index order: repeats add up).
//   top_k(x, k): {values, indices}, the two above: the gradient flows through the values only.
//   scatter_add_rows(src, idx, rows): src real [n, d], idx int32 [n] -> [rows, d], row r the sum of
//     the src rows i with idx[i] = r (in order of i); idx -1 drops the row (a token over an expert's
//     capacity). Its VJP is a gather of the output gradient's rows.
//   gather_rows(table, idx): table real [R, d], idx int32 [n] -> [n, d], row i table[idx[i]], a zero
//     row for idx -1. Its VJP scatter-adds into the table, in order of i.
// Routing to experts at a fixed capacity (a mixture of experts; Switch Transformer, GShard):
//   expert_sources(idx, experts, capacity): idx int32 [N, k] (token n's j-th expert) -> int32
//     [experts * capacity], slot e*capacity + c the token that expert e takes c-th, or -1 (empty).
//     Priority: every token's first choice, in token order, then every second choice, ...; a
//     choice finding its expert full is dropped. No gradient.
//   expert_slots(idx, sources, experts): -> int32 [N, k], the slot each choice took, or -1
//     (dropped): the inverse of the above. No gradient.
//   one_hot(idx, depth): idx int32 [...] -> real [..., depth]; -1 gives a zero row. No gradient.
//   negative_mask(idx): idx int32 -> real, 1 where idx < 0 (a dropped choice), else 0. No gradient.
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

struct GatherRowsOp {
  static constexpr const char* name = "gather_rows";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    const Shape &t = c.in[0], &idx = c.in[1];
    if (c.dtype[0] != DType::real || t.rank != 2) return ShapeResult::fail(Msg("table must be real [R, d], got ").add(t));
    if (c.dtype[1] != DType::index || idx.rank != 1) return ShapeResult::fail(Msg("idx must be int32 [n], got ").add(ops::shapes_msg(c)));
    ShapeResult r;
    r.shape = Shape{idx[0], t[1]};
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct ExpertSourcesOptions {
  int experts = 1;
  Dim capacity = 1;  // rows per expert (a runtime dim: Builder::derive)
};

struct ExpertSourcesOp {
  static constexpr int kMaxExperts = 1024;  // (the kernel counts on the stack: no allocation per step)
  using Options = ExpertSourcesOptions;
  static constexpr const char* name = "expert_sources";
  static constexpr int arity = 1;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c, const ExpertSourcesOptions& o) {
    const Shape& idx = c.in[0];
    if (c.dtype[0] != DType::index || idx.rank != 2 || !idx[1].is_static())
      return ShapeResult::fail(Msg("idx must be int32 [N, k] with a static k, got ").add(idx));
    if (o.experts < 1 || idx[1].coef > o.experts || o.experts > kMaxExperts)
      return ShapeResult::fail(Msg("experts must be in [k = ").add(idx[1]).add(", ").add(kMaxExperts).add("], got ").add(o.experts));
    ShapeResult r;
    r.shape = Shape{Dim(o.experts) * o.capacity};
    r.dtype = DType::index;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

struct ExpertSlotsOptions {
  int experts = 1;
};

struct ExpertSlotsOp {
  using Options = ExpertSlotsOptions;
  static constexpr const char* name = "expert_slots";
  static constexpr int arity = 2;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c, const ExpertSlotsOptions& o) {
    const Shape &idx = c.in[0], &src = c.in[1];
    if (c.dtype[0] != DType::index || idx.rank != 2) return ShapeResult::fail(Msg("idx must be int32 [N, k], got ").add(idx));
    if (c.dtype[1] != DType::index || src.rank != 1) return ShapeResult::fail(Msg("sources must be int32 [experts * capacity], got ").add(src));
    if (o.experts < 1) return ShapeResult::fail(Msg("experts must be positive, got ").add(o.experts));
    ShapeResult r;
    r.shape = idx;
    r.dtype = DType::index;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

struct OneHotOptions {
  int depth = 1;
};

struct OneHotOp {
  using Options = OneHotOptions;
  static constexpr const char* name = "one_hot";
  static constexpr int arity = 1;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c, const OneHotOptions& o) {
    const Shape& idx = c.in[0];
    if (c.dtype[0] != DType::index || idx.rank + 1 > kMaxRank) return ShapeResult::fail(Msg("idx must be int32 of rank < 6, got ").add(idx));
    if (o.depth < 1) return ShapeResult::fail(Msg("depth must be positive, got ").add(o.depth));
    ShapeResult r;
    r.shape = idx;
    r.shape[r.shape.rank++] = o.depth;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

struct NegativeMaskOp {
  static constexpr const char* name = "negative_mask";
  static constexpr int arity = 1;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (c.dtype[0] != DType::index) return ShapeResult::fail(Msg("idx must be int32, got ").add(c.in[0]));
    ShapeResult r;
    r.shape = c.in[0];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
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
constexpr Value gather_rows(Value table, Value idx, Loc loc = Loc::current()) { return ops::apply<GatherRowsOp>({table, idx}, {}, loc); }
constexpr Value expert_sources(Value idx, int experts, Dim capacity, Loc loc = Loc::current()) {
  return ops::apply<ExpertSourcesOp>({idx}, {.experts = experts, .capacity = capacity}, loc);
}
constexpr Value expert_slots(Value idx, Value sources, int experts, Loc loc = Loc::current()) {
  return ops::apply<ExpertSlotsOp>({idx, sources}, {.experts = experts}, loc);
}
constexpr Value one_hot(Value idx, int depth, Loc loc = Loc::current()) { return ops::apply<OneHotOp>({idx}, {.depth = depth}, loc); }
constexpr Value negative_mask(Value idx, Loc loc = Loc::current()) { return ops::apply<NegativeMaskOp>({idx}, {}, loc); }

}  // namespace ctgrad
