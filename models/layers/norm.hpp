// Normalisation layers: parameters "<scope>.weight" (ones) and, for LayerNorm, "<scope>.bias".
#pragma once
#include <ctgrad/graph/builder.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/norm.hpp>

namespace ctgrad::layers {

struct NormOptions {
  NormKind kind = NormKind::layer;
  Real eps = 1e-5;  // a number, or a hyperparameter (Scope::hyper)
};

constexpr Value norm(const Scope& s, Value x, NormOptions o = {}) {
  const auto at = s.enter();
  const Dim d = x.shape().back(1);
  Value gamma = s.param("weight", {d}, init::ones());
  if (o.kind == NormKind::rms) return rms_norm(x, gamma, o.eps);
  Value beta = s.param("bias", {d}, init::zeros());
  const NormForm form = o.kind == NormKind::layer_std_eps ? NormForm::std_plus_eps : NormForm::standard;
  return ctgrad::layer_norm(x, gamma, beta, {.eps = o.eps, .form = form});
}

}  // namespace ctgrad::layers
