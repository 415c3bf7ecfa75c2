// Dropout with a counter-based RNG: element i of node n at forward step s is kept when
// uniform(key(seed, s, n), i) >= p, so the mask is the same on any number of threads and the VJP
// recomputes it instead of storing it. In Mode::infer dropout is the identity.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct DropoutOptions {
  Real p = 0;  // probability of zeroing an element
};

struct DropoutOp {
  using Options = DropoutOptions;
  static constexpr const char* name = "dropout";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr bool in_place = true;  // inactive, it then costs nothing
  static constexpr unsigned shares_grad = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c, const DropoutOptions& o) {
    if (!(o.p >= 0 && o.p < 1)) return ShapeResult::fail(Msg("probability must be in [0, 1), got ").add_number(o.p));

    return ops::same_shape(c);
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

// A constant p == 0 adds no node (layers pass their dropout option straight through); a
// hyperparameter always does, since it may be raised at run time (at 0 the op copies).
constexpr Value dropout(Value x, Real p, Loc loc = Loc::current()) {
  if (!p.is_hyper() && p.value == 0) return x;
  return ops::apply<DropoutOp>({x}, {.p = p}, loc);
}


}  // namespace ctgrad
