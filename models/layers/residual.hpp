// Residual wrapper around a sublayer f, in either placement of the norm:
//   post-norm (the original Transformer's "Add & Norm"): norm(x + dropout(f(x)))
//   pre-norm  (GPT-2, ViT, T5):                           x + dropout(f(norm(x)))
// The norm's parameters are "<scope>.norm.*".
#pragma once
#include <ctgrad/models/layers/norm.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/random.hpp>

namespace ctgrad::layers {

struct ResidualOptions {
  Norm norm_ = Norm::post;
  NormOptions norm_options_{};
  double dropout_ = 0;
  CTGRAD_SETTER(ResidualOptions, Norm, norm)
  CTGRAD_SETTER(ResidualOptions, NormOptions, norm_options)
  CTGRAD_SETTER(ResidualOptions, double, dropout)
  constexpr ResidualOptions& norm_kind(NormKind k) {
    norm_options_.kind(k);
    return *this;
  }
};

template <class F>
constexpr Value residual(const Scope& s, Value x, F sublayer, ResidualOptions o = {}, Loc loc = Loc::current()) {
  if (o.norm_ == Norm::pre) return add(x, ctgrad::dropout(sublayer(norm(s.scope("norm"), x, o.norm_options_, loc)), o.dropout_, loc), loc);
  return norm(s.scope("norm"), add(x, ctgrad::dropout(sublayer(x), o.dropout_, loc), loc), o.norm_options_, loc);
}

}  // namespace ctgrad::layers
