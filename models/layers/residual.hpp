// Residual connection around a sublayer f, in either placement of the norm:
//   post-norm (the original Transformer's "Add & Norm"): norm(x + dropout(f(x)))
//   pre-norm  (GPT-2, ViT, T5):                           x + dropout(f(norm(x)))
// The norm's parameters are those of `norm_scope` ("<norm_scope>.weight/.bias").
#pragma once
#include <ctgrad/models/layers/norm.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/random.hpp>

namespace ctgrad::layers {

struct ResidualOptions {
  Norm placement = Norm::post;
  NormOptions norm{};
  Real dropout = 0;  // on the sublayer's output
};

template <class F>
constexpr Value residual(const Scope& norm_scope, Value x, F sublayer, ResidualOptions o = {}) {
  const auto at = norm_scope.enter();
  if (o.placement == Norm::pre) return add(x, dropout(sublayer(norm(norm_scope, x, o.norm)), o.dropout));
  return norm(norm_scope, add(x, dropout(sublayer(x), o.dropout)), o.norm);
}

}  // namespace ctgrad::layers
