// Enums shared by the layer options. Every options struct in ctgrad is an aggregate of typed public
// fields with defaults, set with designated initializers, e.g.
//   FeedForwardOptions{.d_ff = 2048, .activation = Act::gelu};  TransformerBlockOptions{.norm = Norm::post}
// and, for an ablation, copied and changed: auto o = base; o.norm_options.kind = NormKind::rms;
#pragma once

namespace ctgrad::layers {

enum class Norm { pre, post };                      // where a residual block normalises
enum class NormKind { layer, layer_std_eps, rms };  // LayerNorm, the (x-mean)/(std+eps) form, RMSNorm
enum class Act { relu, gelu, gelu_tanh, silu, gated_gelu };

}  // namespace ctgrad::layers
