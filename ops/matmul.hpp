// Matrix product over the last two dims, with optional transposed operands and batch dims:
//   a: [..., M, K] (or [..., K, M] when trans_a), b: [..., K, N] (or [..., N, K] when trans_b)
//   out: [..., M, N]. b may be 2-D and shared by every batch (a weight); otherwise batch dims match.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct MatmulOptions {
  bool trans_a = false, trans_b = false;
};

struct MatmulOp {
  using Options = MatmulOptions;
  static constexpr const char* name = "matmul";
  static constexpr int arity = 2;
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned assigns = kSaveInput(0) | kSaveInput(1);
  static constexpr ShapeResult shape(const ShapeCtx& c, const MatmulOptions& o) {
    const Shape &a = c.in[0], &b = c.in[1];
    const bool ta = o.trans_a, tb = o.trans_b;
    if (!ops::all_real(c)) return ShapeResult::fail("expects real inputs, got an index tensor");
    if (a.rank < 2 || b.rank < 2)
      return ShapeResult::fail(Msg("needs operands of rank >= 2, got ").add(ops::shapes_msg(c)));
    const Dim m = ta ? a.back(1) : a.back(2), ka = ta ? a.back(2) : a.back(1);
    const Dim kb = tb ? b.back(1) : b.back(2), n = tb ? b.back(2) : b.back(1);
    if (!(ka == kb))
      return ShapeResult::fail(Msg("inner dims differ: ").add(ka).add(" vs ").add(kb).add(" in ")
                                   .add(ops::shapes_msg(c)));
    if (b.rank > 2) {
      if (a.rank != b.rank)
        return ShapeResult::fail(Msg("batch ranks differ in ").add(ops::shapes_msg(c)));
      for (int i = 0; i < a.rank - 2; ++i)
        if (!(a[i] == b[i]))
          return ShapeResult::fail(Msg("batch dim ").add(i).add(" differs: ").add(a[i]).add(" vs ")
                                       .add(b[i]).add(" in ").add(ops::shapes_msg(c)));
    }
    ShapeResult r;
    r.shape = a;
    r.shape[a.rank - 2] = m;
    r.shape[a.rank - 1] = n;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

constexpr Value matmul(Value a, Value b, MatmulOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<MatmulOp>({a, b}, o, loc);
}


}  // namespace ctgrad
