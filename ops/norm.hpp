// Normalisation over the last axis.
//   layer_norm, standard form:  (x - mean) / sqrt(var + eps) * gamma + beta   (var: population)
//   layer_norm, std+eps form:   (x - mean) / (std + eps) * gamma + beta       (std: unbiased, as
//                               torch.std; the form in the Annotated-Transformer-style code)
//   rms_norm:                   x / sqrt(mean(x^2) + eps) * gamma
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

enum class NormForm : std::int64_t { standard = 0, std_plus_eps = 1 };

struct LayerNormOptions {
  Real eps = 1e-5;
  NormForm form = NormForm::standard;
};
struct RmsNormOptions {
  Real eps = 1e-6;
};

namespace ops {
constexpr ShapeResult norm_shape(const ShapeCtx& c, double eps) {
  if (!(eps >= 0)) return ShapeResult::fail(Msg("eps must be >= 0, got ").add_number(eps));
  if (!ops::all_real(c)) return ShapeResult::fail("expects real inputs");
  const Shape& x = c.in[0];
  if (x.rank < 1) return ShapeResult::fail("needs rank >= 1");
  for (int k = 1; k < c.n_in; ++k)
    if (c.in[k].rank != 1 || !(c.in[k][0] == x.back(1)))
      return ShapeResult::fail(Msg(k == 1 ? "gamma" : "beta").add(" must be [").add(x.back(1)).add("], got ").add(c.in[k]));
  ShapeResult r;
  r.shape = x;
  Shape rows = x;
  rows.rank -= 1;
  r.scratch = Dim(3) * rows.numel();  // per row: mean, 1/denominator, std
  return r;
}
}  // namespace ops

struct LayerNormOp {
  using Options = LayerNormOptions;
  static constexpr const char* name = "layer_norm";
  static constexpr int arity = 3;  // x [..., D], gamma [D], beta [D]
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const LayerNormOptions& o) { return ops::norm_shape(c, o.eps); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

struct RmsNormOp {
  using Options = RmsNormOptions;
  static constexpr const char* name = "rms_norm";
  static constexpr int arity = 2;  // x [..., D], gamma [D]
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const RmsNormOptions& o) { return ops::norm_shape(c, o.eps); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

constexpr Value layer_norm(Value x, Value gamma, Value beta, LayerNormOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<LayerNormOp>({x, gamma, beta}, o, loc);
}
constexpr Value rms_norm(Value x, Value gamma, Real eps = 1e-6, Loc loc = Loc::current()) {
  return ops::apply<RmsNormOp>({x, gamma}, {.eps = eps}, loc);
}


}  // namespace ctgrad
