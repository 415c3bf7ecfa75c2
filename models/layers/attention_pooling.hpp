// Attention pooling as d2l's chapter 11 builds it up, before scaled dot products:
//   nadaraya_watson   kernel regression: f(q) = sum_j softmax_j(-((q - k_j) w)^2 / 2) v_j, a
//                     Gaussian kernel of learnable inverse width w ("<scope>.w") (d2l 11.2)
//   additive_scores   w_v^T tanh(q_i + k_j) for projected queries and keys (d2l 11.3; the
//                     attention layer's AttentionScore::additive)
//   additive_attention  one query per row over a row's keys and values, with a key mask:
//                     Bahdanau's attention in a decoder step (d2l 11.4), "<scope>.W_q", "<scope>.w_v"
#pragma once
#include <optional>

#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/mask.hpp>
#include <ctgrad/ops/matmul.hpp>
#include <ctgrad/ops/random.hpp>
#include <ctgrad/ops/shape.hpp>
#include <ctgrad/ops/softmax.hpp>
#include <ctgrad/ops/unary.hpp>

namespace ctgrad::layers {

struct PooledAttention {
  Value out;      // the pooled values
  Value weights;  // the attention weights (before dropout), rows summing to 1
};

// q [..., Q], k [..., K], v [..., K] (or [..., K, D]): out [..., Q] (or [..., Q, D]), weights [..., Q, K].
constexpr PooledAttention nadaraya_watson(const Scope& s, Value q, Value k, Value v, Init w_init = init::uniform(0, 1)) {
  const auto at = s.enter();
  const Shape qs = q.shape(), ks = k.shape(), vs = v.shape();
  if (qs.rank < 1 || ks.rank != qs.rank || (vs.rank != ks.rank && vs.rank != ks.rank + 1))
    s.b->fail(Msg("nadaraya_watson in '").add(s.prefix).add("': queries ").add(qs).add(", keys ").add(ks).add(", values ").add(vs)
                  .add(": needs [..., Q], [..., K] and [..., K] or [..., K, D]"), s.loc);
  Shape qe = qs, ke = ks;
  qe[qe.rank++] = 1;                                   // [..., Q, 1]
  ke[ke.rank] = ke[ke.rank - 1], ke[ke.rank - 1] = 1, ++ke.rank;  // [..., 1, K]
  const Value w = s.param("w", {1}, w_init);  // an inverse width: a larger w, a sharper kernel
  const Value qr = reshape(q, qe);  // one node per statement: the same order at compile and run time
  const Value kr = reshape(k, ke);
  const Value d = (qr - kr) * w;
  const Value weights = softmax(scale(d * d, -0.5));   // [..., Q, K]
  if (vs.rank == ks.rank) {
    Shape ve = vs;
    ve[ve.rank++] = 1;
    return {reshape(matmul(weights, reshape(v, ve)), qs), weights};
  }
  return {matmul(weights, v), weights};
}

// w_v^T tanh(q_i + k_j): q [..., Tq, A], k [..., Tk, A] (projected), w_v [1, A] -> [..., Tq, Tk].
constexpr Value additive_scores(Value q, Value k, Value w_v, Loc loc = Loc::current()) {
  Shape qs = q.shape(), ks = k.shape();
  const Shape out_shape = [&] {
    Shape o = qs;
    if (o.rank >= 1) o[o.rank - 1] = ks.rank >= 2 ? ks[ks.rank - 2] : Dim(1);
    return o;
  }();
  if (qs.rank < 2 || ks.rank != qs.rank) {
    q.b->fail(Msg("additive_scores: queries ").add(qs).add(" and keys ").add(ks).add(" must be [..., Tq, A] and [..., Tk, A]"), loc);
    return q;
  }
  Shape qe = qs, ke = ks;
  qe[qe.rank] = qe[qe.rank - 1], qe[qe.rank - 1] = 1, ++qe.rank;   // [..., Tq, 1, A]
  ke[ke.rank] = ke[ke.rank - 1], ke[ke.rank - 1] = ke[ke.rank - 2], ke[ke.rank - 2] = 1, ++ke.rank;  // [..., 1, Tk, A]
  const Value qr = reshape(q, qe, loc);
  const Value e = tanh(add(qr, reshape(k, ke, loc), loc), loc);
  return reshape(matmul(e, w_v, {.trans_b = true}, loc), out_shape, loc);  // [..., Tq, Tk, 1] -> [..., Tq, Tk]
}

struct AdditiveAttentionOptions {
  int hidden = 0;   // A
  Real dropout = 0;  // on the weights, in training
};

// Bahdanau's attention for one query per row: q [B, Dq] against keys [B, S, A] (projected once per
// source with additive_keys) and values [B, S, D], mask int32 [B, S] (0: padding).
// out [B, D], weights [B, S].
constexpr PooledAttention additive_attention(const Scope& s, Value q, Value keys, Value values, std::optional<Value> mask,
                                             const AdditiveAttentionOptions& o) {
  const auto at = s.enter();
  const Shape ks = keys.shape(), qs = q.shape();
  const Value qa = linear(s.scope("W_q"), q, o.hidden, {.bias = false});                 // [B, A]
  const Value w_v = s.scope("w_v").param("weight", {1, o.hidden}, init::xavier_uniform());
  Value scores = additive_scores(reshape(qa, {qs[0], 1, o.hidden}), keys, w_v);          // [B, 1, S]
  scores = reshape(scores, {ks[0], ks[1]});
  if (mask) scores = masked_fill(scores, *mask, -1e6);  // d2l's masked softmax
  const Value weights = softmax(scores);
  const Value pooled = matmul(reshape(dropout(weights, o.dropout), {ks[0], 1, ks[1]}), values);  // [B, 1, D]
  return {reshape(pooled, {ks[0], values.shape().back(1)}), weights};
}
// The keys of additive_attention: values [B, S, Dk] projected by "<scope>.W_k" (no bias) to A.
constexpr Value additive_keys(const Scope& s, Value values, int hidden) {
  const auto at = s.enter();
  return linear(s.scope("W_k"), values, hidden, {.bias = false});
}

}  // namespace ctgrad::layers
