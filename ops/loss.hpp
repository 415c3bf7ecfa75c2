// Losses: cross-entropy over class logits, mean squared error. Both return a scalar mean.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct CrossEntropyOptions {
  std::int64_t ignore_index = -100;  // rows with this target count for nothing (padding, unmasked tokens)
  Real label_smoothing = 0;
};

// logits [..., C] real, targets [...] int32 class ids; label smoothing eps: per row
// (1 - eps) * -log p[target] + eps * mean_c(-log p[c]) (PyTorch's), averaged over the rows whose
// target is not ignore_index.
struct CrossEntropyOp {
  using Options = CrossEntropyOptions;
  static constexpr const char* name = "cross_entropy";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const CrossEntropyOptions& o) {
    const Shape &x = c.in[0], &t = c.in[1];
    if (c.dtype[0] != DType::real || c.dtype[1] != DType::index)
      return ShapeResult::fail("expects real logits and int32 (index) targets");
    if (x.rank < 1 || t.rank != x.rank - 1)
      return ShapeResult::fail(Msg("targets must have the logits' dims without the class dim, got ")
                                   .add(ops::shapes_msg(c)));
    for (int i = 0; i < t.rank; ++i)
      if (!(t[i] == x[i]))
        return ShapeResult::fail(Msg("dim ").add(i).add(" differs: ").add(x[i]).add(" vs ").add(t[i])
                                     .add(" in ").add(ops::shapes_msg(c)));
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1))
      return ShapeResult::fail(Msg("label smoothing must be in [0, 1], got ").add_number(o.label_smoothing));
    ShapeResult r;
    r.shape = Shape{};
    r.scratch = Dim(2) * t.numel();  // per row: the log-sum-exp (kept for the vjp), the loss
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct MseOp {
  static constexpr const char* name = "mse";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned assigns = kSaveInput(0) | kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (!ops::all_real(c)) return ShapeResult::fail("expects real inputs");
    if (!(c.in[0] == c.in[1])) return ShapeResult::fail(Msg("shapes differ: ").add(ops::shapes_msg(c)));
    return ShapeResult{};
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

constexpr Value cross_entropy(Value logits, Value targets, CrossEntropyOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<CrossEntropyOp>({logits, targets}, o, loc);
}

constexpr Value mse(Value pred, Value target, Loc loc = Loc::current()) {
  return ops::apply<MseOp>({pred, target}, {}, loc);
}

}  // namespace ctgrad
