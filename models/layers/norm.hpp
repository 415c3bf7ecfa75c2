// LayerNorm layer: parameters "<scope>.weight" (ones) and "<scope>.bias" (zeros) over the last dim.
#pragma once
#include <ctgrad/graph/builder.hpp>
#include <ctgrad/ops/norm.hpp>

namespace ctgrad::layers {

constexpr Value layer_norm(const Scope& s, Value x, double eps = 1e-5, Loc loc = Loc::current()) {
  const Dim d = x.shape().back(1);
  Value gamma = s.param("weight", {d}, init::ones(), loc);
  Value beta = s.param("bias", {d}, init::zeros(), loc);
  return ctgrad::layer_norm(x, gamma, beta, {.eps = eps}, loc);
}

}  // namespace ctgrad::layers
