// Enums shared by the layer options. Every options struct in ctgrad is an aggregate of typed public
// fields with defaults, set with designated initializers, e.g.
//   FeedForwardOptions{.d_ff = 2048, .activation = Act::gelu};  TransformerBlockOptions{.norm = Norm::post}
// and, for an ablation, copied and changed: auto o = base; o.norm_options.kind = NormKind::rms;
#pragma once
#include <string_view>

namespace ctgrad::layers {

enum class Norm { pre, post };                      // where a residual block normalises
enum class NormKind { layer, layer_std_eps, rms };  // LayerNorm, the (x-mean)/(std+eps) form, RMSNorm
enum class Act { relu, gelu, gelu_tanh, silu, gated_gelu, swiglu, relu_squared };  // gated: wo(act(wi_0 x) * wi_1 x)
enum class Pos { learned, sinusoidal, none, rope };  // absolute positions added to the embeddings, or rotary ones on q and k
enum class Mixer { attention, ssm };  // a block's token mixer: self-attention, or a selective state-space layer (models/layers/ssm.hpp)

constexpr bool gated(Act a) { return a == Act::gated_gelu || a == Act::swiglu; }

// The architecture choices an ablation study varies, shared by the model families' configs; each
// family's presets set its own.
struct Arch {
  Norm norm = Norm::pre;
  NormKind norm_kind = NormKind::layer;
  Act act = Act::gelu;
  Pos pos = Pos::learned;
  bool tie = true;  // the output projection is the token embedding's transpose
};

// The names of the choices, as config values ("post", "rms", "swiglu", "sinusoidal").
constexpr std::string_view name(Norm v) { return v == Norm::pre ? "pre" : "post"; }
constexpr std::string_view name(NormKind v) { return v == NormKind::layer ? "layer" : v == NormKind::rms ? "rms" : "layer_std_eps"; }
constexpr std::string_view name(Act v) {
  switch (v) {
    case Act::relu: return "relu";
    case Act::gelu: return "gelu";
    case Act::gelu_tanh: return "gelu_tanh";
    case Act::silu: return "silu";
    case Act::gated_gelu: return "gated_gelu";
    case Act::swiglu: return "swiglu";
    case Act::relu_squared: return "relu_squared";
  }
  return "";
}
constexpr std::string_view name(Pos v) { return v == Pos::learned ? "learned" : v == Pos::sinusoidal ? "sinusoidal" : v == Pos::rope ? "rope" : "none"; }
constexpr std::string_view name(Mixer v) { return v == Mixer::ssm ? "ssm" : "attention"; }
constexpr Norm parse_norm(std::string_view s) { return s == "post" ? Norm::post : Norm::pre; }
constexpr NormKind parse_norm_kind(std::string_view s) { return s == "rms" ? NormKind::rms : s == "layer_std_eps" ? NormKind::layer_std_eps : NormKind::layer; }
constexpr Act parse_act(std::string_view s) {
  for (Act a : {Act::relu, Act::gelu, Act::gelu_tanh, Act::silu, Act::gated_gelu, Act::swiglu, Act::relu_squared})
    if (name(a) == s) return a;
  return Act::relu;
}
constexpr Pos parse_pos(std::string_view s) {
  return s == "sinusoidal" ? Pos::sinusoidal : s == "none" ? Pos::none : s == "rope" ? Pos::rope : Pos::learned;
}

// SwiGLU's hidden width for about the parameter count of a plain FFN of d_ff (Shazeer 2020: 2/3
// of it, as LLaMA), rounded up to a multiple of 8.
constexpr int gated_width(int d_ff) { return (2 * d_ff / 3 + 7) / 8 * 8; }

}  // namespace ctgrad::layers
