// Softmax and log-softmax over the last axis (stable: the row max is subtracted first).
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct SoftmaxOp {
  static constexpr const char* name = "softmax";
  static constexpr int arity = 1;
  static constexpr unsigned saves = kSaveOutput;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (c.in[0].rank < 1) return ShapeResult::fail("needs rank >= 1");
    return ops::same_shape(c);
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

// log_softmax over the last axis: x - logsumexp(x), stable for any magnitude of x.
struct LogSoftmaxOp {
  static constexpr const char* name = "log_softmax";
  static constexpr int arity = 1;
  static constexpr unsigned saves = kSaveOutput;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c) { return SoftmaxOp::shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

constexpr Value softmax(Value x, Loc loc = Loc::current()) { return ops::apply<SoftmaxOp>({x}, {}, loc); }
constexpr Value log_softmax(Value x, Loc loc = Loc::current()) { return ops::apply<LogSoftmaxOp>({x}, {}, loc); }

}  // namespace ctgrad
