// Position-wise feed-forward: fc2(dropout(act(fc1 x))); gated GELU (T5 v1.1): wo(gelu(wi_0 x) * wi_1 x), GELU's tanh
// form as T5's (Hugging Face's gelu_new); SwiGLU (Shazeer 2020, LLaMA): wo(silu(wi_0 x) * wi_1 x).
#pragma once
#include <string_view>

#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/random.hpp>
#include <ctgrad/ops/unary.hpp>

namespace ctgrad::layers {

// Parameter scope names (Hugging Face Llama's gated MLP: gate_proj, up_proj, down_proj).
struct FeedForwardNames {
  std::string_view fc1 = "fc1", fc2 = "fc2", gate = "wi_0", up = "wi_1", down = "wo";
};

struct FeedForwardOptions {
  int d_ff = 2048;
  Act activation = Act::relu;
  Real dropout = 0;                         // on the hidden activations
  bool bias = true;
  Init init = init::xavier_uniform();      // input projection(s)
  Init out_init = init::xavier_uniform();  // output projection (GPT-2 scales it by depth)
  FeedForwardNames names{};
};

constexpr Value activate(Value x, Act a) {
  switch (a) {
    case Act::relu: return relu(x);
    case Act::gelu: return gelu(x);
    case Act::gelu_tanh: return gelu_tanh(x);
    case Act::silu: return silu(x);
    case Act::relu_squared: return relu_squared(x);
    case Act::gated_gelu:
    case Act::swiglu: break;
  }
  return gelu(x);
}

constexpr Value feed_forward(const Scope& s, Value x, FeedForwardOptions o = {}) {
  const auto at = s.enter();
  const Dim d = x.shape().back(1);
  const LinearOptions in{.bias = o.bias, .init = o.init}, out{.bias = o.bias, .init = o.out_init};
  Value h{};
  if (gated(o.activation)) {
    Value gate = linear(s.scope(o.names.gate), x, o.d_ff, in);
    const Value act = o.activation == Act::swiglu ? silu(gate) : gelu_tanh(gate);
    h = mul(act, linear(s.scope(o.names.up), x, o.d_ff, in));
  } else {
    h = activate(linear(s.scope(o.names.fc1), x, o.d_ff, in), o.activation);
  }
  return linear(s.scope(gated(o.activation) ? o.names.down : o.names.fc2), dropout(h, o.dropout), d, out);
}

}  // namespace ctgrad::layers
