// Shared enums of the layer options, so an ablation is a one-line change:
//   ResidualOptions().norm(Norm::pre).norm_kind(NormKind::rms);  FeedForwardOptions().activation(Act::gelu)
#pragma once

namespace ctgrad::layers {

enum class Norm { pre, post };                    // where a residual block normalises
enum class NormKind { layer, layer_std_eps, rms };  // LayerNorm, the (x-mean)/(std+eps) form, RMSNorm
enum class Act { relu, gelu, gelu_tanh, silu, gated_gelu };

#define CTGRAD_SETTER(Type, type, name) \
  constexpr Type& name(type v) {        \
    name##_ = v;                        \
    return *this;                       \
  }

}  // namespace ctgrad::layers
