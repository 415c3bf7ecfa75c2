// Multi-head attention (self and cross) on the fused attention op: projections "<scope>.wq/wk/wv/wo"
// (or one fused "<scope>.qkv" for self-attention), head split and merge, padding and causal masks,
// dropout on the probabilities, optional T5 relative position bias, optionally the weights for
// heatmaps. q_in [Batch, Tq, d], kv_in [Batch, Tk, d]; mask broadcasting to [Batch, heads, Tq, Tk].
#pragma once
#include <optional>

#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/attention.hpp>
#include <ctgrad/ops/index.hpp>
#include <ctgrad/ops/position.hpp>
#include <ctgrad/ops/shape.hpp>

namespace ctgrad::layers {

struct MultiHeadAttentionOptions {
  int heads_ = 8;
  double dropout_ = 0;
  bool causal_ = false;
  bool bias_ = true;
  bool fused_qkv_ = false;      // one [3d, d] projection (GPT-2); self-attention only
  bool relative_bias_ = false;  // T5: a learned bias per (bucket, head), "<scope>.relative_bias"
  RelativeBiasOptions relative_{};
  bool scale_scores_ = true;    // T5 does not scale scores by 1/sqrt(d_head)
  Init init_ = init::xavier_uniform();      // q, k, v (or qkv) projection weights
  Init out_init_ = init::xavier_uniform();  // output projection (GPT-2 scales it by depth)
  CTGRAD_SETTER(MultiHeadAttentionOptions, int, heads)
  CTGRAD_SETTER(MultiHeadAttentionOptions, double, dropout)
  CTGRAD_SETTER(MultiHeadAttentionOptions, bool, causal)
  CTGRAD_SETTER(MultiHeadAttentionOptions, bool, bias)
  CTGRAD_SETTER(MultiHeadAttentionOptions, bool, fused_qkv)
  CTGRAD_SETTER(MultiHeadAttentionOptions, bool, relative_bias)
  CTGRAD_SETTER(MultiHeadAttentionOptions, RelativeBiasOptions, relative)
  CTGRAD_SETTER(MultiHeadAttentionOptions, bool, scale_scores)
  CTGRAD_SETTER(MultiHeadAttentionOptions, Init, init)
  CTGRAD_SETTER(MultiHeadAttentionOptions, Init, out_init)
};

// Incremental decoding: k and v are [Batch, heads, SeqKV, d_head] inputs holding the past keys and
// values plus room for the new rows (SeqKV = past + Tq). multi_head_attention writes this step's
// keys and values into that room and leaves the updated caches here, to be made outputs.
// With `fixed`, k and v are complete keys and values (cross-attention over an encoded source,
// from project_kv): nothing is projected or written.
struct KvCache {
  Value k, v;
  bool fixed = false;
};

namespace detail {
// [B, T, d] -> [B, heads, T, d/heads]
constexpr Value split_heads(Value x, int heads, const Loc& loc) {
  const Shape s = x.shape();
  return transpose(reshape(x, {s[0], s[1], heads, s[2].coef / heads}, loc), 1, 2, loc);
}
}  // namespace detail

// `weights`, when given, receives [Batch, heads, Tq, Tk] attention probabilities (no dropout).
// `cache`, when given, makes this a decoding step over cached keys and values (see KvCache).
constexpr Value multi_head_attention(const Scope& s, Value q_in, Value kv_in, std::optional<Value> mask,
                                     MultiHeadAttentionOptions o = {}, Value* weights = nullptr, KvCache* cache = nullptr,
                                     Loc loc = Loc::current()) {
  const Shape qs = q_in.shape();
  const Dim d = qs.back(1);
  if (d.coef % o.heads_) s.b->fail(Msg("multi_head_attention in '").add(s.prefix).add("': d_model ").add(d).add(" is not a multiple of ")
                                       .add(o.heads_).add(" heads"), loc);
  const LinearOptions lin = LinearOptions().bias(o.bias_).weight_init(o.init_);
  const LinearOptions out_lin = LinearOptions().bias(o.bias_).weight_init(o.out_init_);
  Value q, k, v;
  if (cache && cache->fixed) {
    q = linear(s.scope("wq"), q_in, d, lin, loc);
    k = cache->k, v = cache->v;
  } else if (o.fused_qkv_) {
    auto qkv = split<3>(linear(s.scope("qkv"), q_in, Dim(3) * d, lin, loc), -1, loc);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    q = linear(s.scope("wq"), q_in, d, lin, loc);
    k = linear(s.scope("wk"), kv_in, d, lin, loc);
    v = linear(s.scope("wv"), kv_in, d, lin, loc);
  }
  q = detail::split_heads(q, o.heads_, loc);
  if (!cache || !cache->fixed) {
    k = detail::split_heads(k, o.heads_, loc);
    v = detail::split_heads(v, o.heads_, loc);
  }
  if (cache && !cache->fixed) {
    k = cache->k = overwrite_tail(cache->k, k, 2, loc);
    v = cache->v = overwrite_tail(cache->v, v, 2, loc);
  }
  const double scale = o.scale_scores_ ? 1 / ops::const_sqrt(double(d.coef / o.heads_)) : 1.0;
  std::optional<Value> m = mask;
  if (o.relative_bias_) {
    // The bias enters as an additive term: fold it into q k^T by attention over an explicit
    // score tensor (T5 models are small; the fused path has no additive bias input).
    Value table = s.param("relative_bias", {o.relative_.buckets, o.heads_}, init::normal(0.02), loc);
    Value scores = add(ctgrad::scale(matmul(q, k, {.trans_b = true}, loc), scale, loc),
                       relative_position_bias(table, q, k, o.relative_, loc), loc);
    if (o.causal_) scores = masked_fill(scores, causal_mask(q, 2, loc), -1e30, loc);
    if (m) scores = masked_fill(scores, *m, -1e30, loc);
    Value p = softmax(scores, loc);
    if (weights) *weights = p;
    Value o_heads = matmul(ctgrad::dropout(p, o.dropout_, loc), v, {}, loc);
    return linear(s.scope("wo"), reshape(transpose(o_heads, 1, 2, loc), {qs[0], qs[1], d}, loc), d, out_lin, loc);
  }
  const AttentionOptions ao{.scale = scale, .dropout = o.dropout_, .causal = o.causal_};
  Value out = m ? attention(q, k, v, *m, ao, loc) : attention(q, k, v, ao, loc);
  if (weights) {
    Value full_mask = o.causal_ ? causal_mask(q, 2, loc) : Value{};
    if (m && o.causal_) *weights = attention_weights(q, k, mul(*m, full_mask, loc), scale, loc);
    else if (m) *weights = attention_weights(q, k, *m, scale, loc);
    else if (o.causal_) *weights = attention_weights(q, k, full_mask, scale, loc);
    else *weights = softmax(ctgrad::scale(matmul(q, k, {.trans_b = true}, loc), scale, loc), loc);
  }
  return linear(s.scope("wo"), reshape(transpose(out, 1, 2, loc), {qs[0], qs[1], d}, loc), d, out_lin, loc);
}

// The keys and values multi_head_attention(s, ., kv_in, ...) computes, [Batch, heads, Tk, d_head],
// with the same parameters: computed once per source for incremental decoding.
constexpr KvCache project_kv(const Scope& s, Value kv_in, MultiHeadAttentionOptions o = {}, Loc loc = Loc::current()) {
  const Dim d = kv_in.shape().back(1);
  const LinearOptions lin = LinearOptions().bias(o.bias_).weight_init(o.init_);
  return {detail::split_heads(linear(s.scope("wk"), kv_in, d, lin, loc), o.heads_, loc),
          detail::split_heads(linear(s.scope("wv"), kv_in, d, lin, loc), o.heads_, loc), true};
}

}  // namespace ctgrad::layers
