// Layer normalisation over the last axis: y = (x - mean) / sqrt(var + eps) * gamma + beta.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct LayerNormOp {
  static constexpr const char* name = "layer_norm";
  static constexpr int arity = 3;  // x [..., D], gamma [D], beta [D]; attr.f[0] = eps
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (!ops::all_real(c)) return ShapeResult::fail("expects real inputs");
    const Shape& x = c.in[0];
    if (x.rank < 1) return ShapeResult::fail("needs rank >= 1");
    for (int k = 1; k < 3; ++k)
      if (c.in[k].rank != 1 || !(c.in[k][0] == x.back(1)))
        return ShapeResult::fail(Msg(k == 1 ? "gamma" : "beta").add(" must be [").add(x.back(1)).add("], got ")
                                     .add(c.in[k]));
    ShapeResult r;
    r.shape = x;
    Shape rows = x;
    rows.rank -= 1;
    r.scratch = Dim(2) * rows.numel();  // mean and 1/std per row
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

constexpr Value layer_norm(Value x, Value gamma, Value beta, double eps = 1e-5, Loc loc = Loc::current()) {
  Attrs a;
  a.f[0] = eps;
  return ops::apply<LayerNormOp>({x, gamma, beta}, a, loc);
}

}  // namespace ctgrad
