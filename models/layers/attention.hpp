// Multi-head attention from fine-grained ops (projections, head split, masked softmax, merge).
// q_in [Batch, Tq, d], kv_in [Batch, Tk, d]; mask broadcasts to the scores [Batch, heads, Tq, Tk]
// (e.g. [Batch,1,1,Tk] key padding, [1,1,Tq,Tk] causal); 0 = masked.
#pragma once
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/ops/mask.hpp>
#include <ctgrad/ops/shape.hpp>
#include <ctgrad/ops/softmax.hpp>

namespace ctgrad::layers {

namespace detail {
constexpr double inv_sqrt(double v) {  // constexpr 1/sqrt(v), v > 0: Newton's method on sqrt
  double s = v > 1 ? v : 1;
  for (int i = 0; i < 100; ++i) s = 0.5 * (s + v / s);
  return 1 / s;
}
// [B, T, d] -> [B, heads, T, d/heads]
constexpr Value split_heads(Value x, int heads, const Loc& loc) {
  const Shape s = x.shape();
  const Dim dh = s[2].coef / heads;
  return transpose(reshape(x, {s[0], s[1], heads, dh}, loc), 1, 2, loc);
}
}  // namespace detail

constexpr Value multi_head_attention(const Scope& s, Value q_in, Value kv_in, Value mask, int heads,
                                     Loc loc = Loc::current()) {
  const Shape qs = q_in.shape();
  const Dim d = qs.back(1);
  const int dh = int(d.coef) / heads;
  Value q = detail::split_heads(linear(s.scope("wq"), q_in, d, {}, loc), heads, loc);
  Value k = detail::split_heads(linear(s.scope("wk"), kv_in, d, {}, loc), heads, loc);
  Value v = detail::split_heads(linear(s.scope("wv"), kv_in, d, {}, loc), heads, loc);
  Value scores = scale(matmul(q, k, {.trans_b = true}, loc), detail::inv_sqrt(dh), loc);
  Value p = softmax(masked_fill(scores, mask, -1e9, loc), loc);
  Value o = transpose(matmul(p, v, {}, loc), 1, 2, loc);  // [B, Tq, heads, dh]
  return linear(s.scope("wo"), reshape(o, {qs[0], qs[1], d}, loc), d, {}, loc);
}

}  // namespace ctgrad::layers
