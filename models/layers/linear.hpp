// Linear layer: y = x W^T + b, W [out, in] (PyTorch's layout), parameters "<scope>.weight/.bias".
#pragma once
#include <ctgrad/graph/builder.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/linear.hpp>
#include <ctgrad/ops/matmul.hpp>

namespace ctgrad::layers {

struct LinearOptions {
  bool bias = true;
  Init init = init::xavier_uniform();  // the weight's; the bias starts at 0
};

constexpr Value linear(const Scope& s, Value x, Dim out, LinearOptions o = {}) {
  const auto at = s.enter();
  const Dim in = x.shape().rank ? x.shape().back(1) : Dim(1);
  if (x.dtype() != DType::real)
    s.b->fail(Msg("linear '").add(s.prefix).add("': expects real features [..., ").add(in).add("], got an int32 (index) tensor ")
                  .add(x.shape()).add(" (embed ids first)"), s.loc);
  Value w = s.param("weight", {out, in}, o.init);
  if (!o.bias) return matmul(x, w, {.trans_b = true});
  return ctgrad::linear(x, w, s.param("bias", {out}, init::zeros()));  // one fused node
}

}  // namespace ctgrad::layers
