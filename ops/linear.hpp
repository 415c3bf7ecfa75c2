// Fused linear layer op: y = x W^T + b (W [out, in], PyTorch's layout), one node instead of a
// matmul and a broadcast add: the bias is written first and the GEMM accumulates onto it.
// Patch embedding (ViT): images [B, C, H, W] cut into non-overlapping p x p patches, each
// flattened in (c, i, j) order and projected: W [D, C*p*p], b [D] -> [B, (H/p)*(W/p), D]. This is
// a convolution with kernel = stride = p (d2l's PatchEmbedding), as a GEMM.
#pragma once
#include <ctgrad/ops/common.hpp>

namespace ctgrad {

struct LinearOp {
  static constexpr const char* name = "linear";
  static constexpr int arity = 3;  // x [..., in], W [out, in], b [out]
  static constexpr unsigned saves = kSaveInput(0) | kSaveInput(1);
  static constexpr unsigned assigns = kSaveInput(0) | kSaveInput(1) | kSaveInput(2);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    if (!ops::all_real(c)) return ShapeResult::fail("expects real inputs");
    const Shape &x = c.in[0], &w = c.in[1], &b = c.in[2];
    if (x.rank < 1 || w.rank != 2) return ShapeResult::fail(Msg("needs x [..., in] and W [out, in], got ").add(ops::shapes_msg(c)));
    if (!(x.back(1) == w[1]))
      return ShapeResult::fail(Msg("in-features differ: ").add(x.back(1)).add(" vs ").add(w[1]).add(" in ").add(ops::shapes_msg(c)));
    if (b.rank != 1 || !(b[0] == w[0]))
      return ShapeResult::fail(Msg("bias must be [").add(w[0]).add("], got ").add(b));
    ShapeResult r;
    r.shape = x;
    r.shape[x.rank - 1] = w[0];
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

struct PatchEmbedOptions {
  int patch = 1;
};

struct PatchEmbedOp {
  using Options = PatchEmbedOptions;
  static constexpr const char* name = "patch_embed";
  static constexpr int arity = 3;  // images [B, C, H, W], W [D, C*p*p], b [D]
  static constexpr unsigned saves = kSaveInput(1);  // patches are kept in scratch
  static constexpr ShapeResult shape(const ShapeCtx& c, const PatchEmbedOptions& o) {
    if (!ops::all_real(c)) return ShapeResult::fail("expects real inputs");
    const Shape &x = c.in[0], &w = c.in[1], &b = c.in[2];
    const std::int64_t p = o.patch;
    if (x.rank != 4 || !x[1].is_static() || !x[2].is_static() || !x[3].is_static())
      return ShapeResult::fail(Msg("images must be [Batch, C, H, W] with static C, H, W, got ").add(x));
    if (p < 1 || x[2].coef % p || x[3].coef % p)
      return ShapeResult::fail(Msg("patch size ").add(p).add(" does not divide the image ").add(x[2]).add("x").add(x[3]));
    const std::int64_t cpp = x[1].coef * p * p;
    if (w.rank != 2 || !(w[1] == Dim(cpp)))
      return ShapeResult::fail(Msg("weight must be [D, C*p*p] = [D, ").add(cpp).add("], got ").add(w));
    if (b.rank != 1 || !(b[0] == w[0])) return ShapeResult::fail(Msg("bias must be [").add(w[0]).add("], got ").add(b));
    ShapeResult r;
    const Dim n = (x[2].coef / p) * (x[3].coef / p);
    r.shape = Shape{x[0], n, w[0]};
    r.scratch = Dim(2) * x[0] * n * Dim(cpp);  // patches (for dW), and their gradient in the vjp
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
};

constexpr Value linear(Value x, Value w, Value b, Loc loc = Loc::current()) { return ops::apply<LinearOp>({x, w, b}, {}, loc); }
constexpr Value patch_embed(Value images, Value w, Value b, int patch, Loc loc = Loc::current()) {
  return ops::apply<PatchEmbedOp>({images, w, b}, {.patch = patch}, loc);
}

}  // namespace ctgrad
