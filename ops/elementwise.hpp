// Elementwise ops: add, sub, mul, div with NumPy broadcasting; relu; scale; detach.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct AddOp {
  static constexpr const char* name = "add";
  static constexpr int arity = 2;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned shares_grad = kSaveInput(0) | kSaveInput(1);  // a residual's branch: no copy
  static constexpr bool in_place = true;  // the sum may overwrite input 0 (a residual's branch)
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::broadcast_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

struct SubOp {
  static constexpr const char* name = "sub";
  static constexpr int arity = 2;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned shares_grad = kSaveInput(0);
  static constexpr bool in_place = true;
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::broadcast_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

struct MulOp {
  static constexpr const char* name = "mul";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned assigns = kSaveInput(0) | kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::broadcast_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

struct DivOp {
  static constexpr const char* name = "div";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned assigns = kSaveInput(0) | kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::broadcast_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

struct ReluOp {
  static constexpr const char* name = "relu";
  static constexpr int arity = 1;
  static constexpr unsigned saves = kSaveOutput;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr bool in_place = true;
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::same_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

struct ScaleOptions {
  Real factor = 1;
};

// y = factor * x
struct ScaleOp {
  using Options = ScaleOptions;
  static constexpr const char* name = "scale";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr bool in_place = true;
  static constexpr ShapeResult shape(const ShapeCtx& c) { return ops::same_shape(c); }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

// y = x, with no gradient flowing back.
struct DetachOp {
  static constexpr const char* name = "detach";
  static constexpr int arity = 1;
  static constexpr bool differentiable = false;
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    ShapeResult r;
    r.shape = c.in[0];
    r.dtype = c.dtype[0];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
};

constexpr Value add(Value a, Value b, Loc loc = Loc::current()) { return ops::apply<AddOp>({a, b}, {}, loc); }
constexpr Value sub(Value a, Value b, Loc loc = Loc::current()) { return ops::apply<SubOp>({a, b}, {}, loc); }
constexpr Value mul(Value a, Value b, Loc loc = Loc::current()) { return ops::apply<MulOp>({a, b}, {}, loc); }
constexpr Value div(Value a, Value b, Loc loc = Loc::current()) { return ops::apply<DivOp>({a, b}, {}, loc); }
constexpr Value relu(Value x, Loc loc = Loc::current()) { return ops::apply<ReluOp>({x}, {}, loc); }
constexpr Value scale(Value x, Real s, Loc loc = Loc::current()) { return ops::apply<ScaleOp>({x}, {.factor = s}, loc); }
constexpr Value detach(Value x, Loc loc = Loc::current()) { return ops::apply<DetachOp>({x}, {}, loc); }

// Operators take one operand as a ValueAt, whose converting constructor's default argument is
// evaluated where the expression is written: an error in `a + b` names the user's line.
struct ValueAt {
  Value v;
  Loc loc;
  constexpr ValueAt(Value value, Loc at = Loc::current()) : v(value), loc(at) {}  // NOLINT
};
constexpr Value operator+(ValueAt a, Value b) { return add(a.v, b, a.loc); }
constexpr Value operator-(ValueAt a, Value b) { return sub(a.v, b, a.loc); }
constexpr Value operator*(ValueAt a, Value b) { return mul(a.v, b, a.loc); }
constexpr Value operator/(ValueAt a, Value b) { return div(a.v, b, a.loc); }
constexpr Value operator*(ValueAt a, double s) { return scale(a.v, s, a.loc); }
constexpr Value operator*(double s, ValueAt a) { return scale(a.v, s, a.loc); }
// A hyperparameter factor stays one: set_hyper changes what the op multiplies by (a Real converts
// to a double, which would freeze its default).
constexpr Value operator*(ValueAt a, Real s) { return scale(a.v, s, a.loc); }
constexpr Value operator*(Real s, ValueAt a) { return scale(a.v, s, a.loc); }

}  // namespace ctgrad
