// Linear layer: y = x W^T + b, W [out, in] (PyTorch's layout), parameters "<scope>.weight/.bias".
#pragma once
#include <ctgrad/graph/builder.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/linear.hpp>
#include <ctgrad/ops/matmul.hpp>

namespace ctgrad::layers {

struct LinearOptions {
  bool bias_ = true;
  Init weight_init_ = init::xavier_uniform();
  constexpr LinearOptions& bias(bool b) {
    bias_ = b;
    return *this;
  }
  constexpr LinearOptions& weight_init(Init i) {
    weight_init_ = i;
    return *this;
  }
};

constexpr Value linear(const Scope& s, Value x, Dim out, LinearOptions o = {}, Loc loc = Loc::current()) {
  const Dim in = x.shape().rank ? x.shape().back(1) : Dim(1);
  Value w = s.param("weight", {out, in}, o.weight_init_, loc);
  if (!o.bias_) return matmul(x, w, {.trans_b = true}, loc);
  return ctgrad::linear(x, w, s.param("bias", {out}, init::zeros(), loc), loc);  // one fused node
}

}  // namespace ctgrad::layers
