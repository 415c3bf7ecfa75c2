// Position-wise feed-forward: fc2(dropout(act(fc1 x))); gated GELU (T5 v1.1): fc2(gelu(wi_0 x) * wi_1 x).
#pragma once
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/random.hpp>
#include <ctgrad/ops/unary.hpp>

namespace ctgrad::layers {

struct FeedForwardOptions {
  int d_ff_ = 2048;
  Act activation_ = Act::relu;
  double dropout_ = 0;
  bool bias_ = true;
  Init init_ = init::xavier_uniform();      // input projection(s)
  Init out_init_ = init::xavier_uniform();  // output projection (GPT-2 scales it by depth)
  CTGRAD_SETTER(FeedForwardOptions, int, d_ff)
  CTGRAD_SETTER(FeedForwardOptions, Act, activation)
  CTGRAD_SETTER(FeedForwardOptions, double, dropout)
  CTGRAD_SETTER(FeedForwardOptions, bool, bias)
  CTGRAD_SETTER(FeedForwardOptions, Init, init)
  CTGRAD_SETTER(FeedForwardOptions, Init, out_init)
};

constexpr Value activate(Value x, Act a, const Loc& loc) {
  switch (a) {
    case Act::relu: return relu(x, loc);
    case Act::gelu: return gelu(x, loc);
    case Act::gelu_tanh: return gelu_tanh(x, loc);
    case Act::silu: return silu(x, loc);
    case Act::gated_gelu: break;
  }
  return gelu(x, loc);
}

constexpr Value feed_forward(const Scope& s, Value x, FeedForwardOptions o = {}, Loc loc = Loc::current()) {
  const Dim d = x.shape().back(1);
  const LinearOptions lin = LinearOptions().bias(o.bias_).weight_init(o.init_);
  Value h = o.activation_ == Act::gated_gelu
                ? mul(gelu(linear(s.scope("wi_0"), x, o.d_ff_, lin, loc), loc), linear(s.scope("wi_1"), x, o.d_ff_, lin, loc), loc)
                : activate(linear(s.scope("fc1"), x, o.d_ff_, lin, loc), o.activation_, loc);
  return linear(s.scope(o.activation_ == Act::gated_gelu ? "wo" : "fc2"), ctgrad::dropout(h, o.dropout_, loc), d,
                LinearOptions().bias(o.bias_).weight_init(o.out_init_), loc);
}

}  // namespace ctgrad::layers
