// Dropout with a counter-based RNG: element i of node n at forward step s is kept when
// uniform(key(seed, s, n), i) >= p, so the mask is the same on any number of threads and the VJP
// recomputes it instead of storing it. In Mode::infer dropout is the identity.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct DropoutOp {
  static constexpr const char* name = "dropout";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (!(c.attr.f[0] >= 0 && c.attr.f[0] < 1)) return ShapeResult::fail("probability must be in [0, 1)");
    return ops::same_shape(c);
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// p == 0 adds no node (layers pass their dropout option straight through).
constexpr Value dropout(Value x, double p, Loc loc = Loc::current()) {
  if (p == 0) return x;
  Attrs a;
  a.f[0] = p;
  return ops::apply<DropoutOp>({x}, a, loc);
}

}  // namespace ctgrad
