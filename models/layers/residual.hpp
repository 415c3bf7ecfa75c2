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
  // The branch is the add's input 0, so the sum may take its buffer (x is still read by the
  // norm's or the sublayer's VJP): one stream fewer to memory and one activation less.
  if (o.placement == Norm::pre) return add(dropout(sublayer(norm(norm_scope, x, o.norm)), o.dropout), x);
  return norm(norm_scope, add(dropout(sublayer(x), o.dropout), x), o.norm);
}

}  // namespace ctgrad::layers
