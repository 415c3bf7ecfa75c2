// Normalisation layers: parameters "<scope>.weight" (ones) and, for LayerNorm, "<scope>.bias".
#pragma once
#include <ctgrad/graph/builder.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/norm.hpp>

namespace ctgrad::layers {

struct NormOptions {
  NormKind kind_ = NormKind::layer;
  double eps_ = 1e-5;
  CTGRAD_SETTER(NormOptions, NormKind, kind)
  CTGRAD_SETTER(NormOptions, double, eps)
};

constexpr Value norm(const Scope& s, Value x, NormOptions o = {}, Loc loc = Loc::current()) {
  const Dim d = x.shape().back(1);
  Value gamma = s.param("weight", {d}, init::ones(), loc);
  if (o.kind_ == NormKind::rms) return rms_norm(x, gamma, o.eps_, loc);
  Value beta = s.param("bias", {d}, init::zeros(), loc);
  const NormForm form = o.kind_ == NormKind::layer_std_eps ? NormForm::std_plus_eps : NormForm::standard;
  return ctgrad::layer_norm(x, gamma, beta, {.eps = o.eps_, .form = form}, loc);
}

constexpr Value layer_norm(const Scope& s, Value x, double eps = 1e-5, Loc loc = Loc::current()) {
  return norm(s, x, NormOptions().eps(eps), loc);
}

}  // namespace ctgrad::layers
