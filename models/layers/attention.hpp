// Multi-head attention (self and cross) on the fused attention op: projections "<scope>.wq/wk/wv/wo"
// (or one fused "<scope>.qkv" for self-attention), head split and merge, a mask that selects and
// a bias that adds (T5's relative position bias, see relative_bias), dropout on the
// probabilities, optionally the probabilities themselves for heatmaps, and incremental decoding
// over cached keys and values. Also: grouped-query attention (kv_heads < heads: wk
// and wv project to kv_heads heads, and the cache holds those only), rotary positions on q and k,
// QK-norm (RMSNorm over each head's features, "<scope>.q_norm/k_norm", as Qwen3), a sliding
// window and soft-capped scores (the attention op's).
//   in.q [Batch, Tq, d]; in.kv [Batch, Tk, d] (none: self-attention); mask/bias broadcast to
//   [Batch, heads, Tq, Tk]; in.positions int32 [Tq]: the queries' positions for RoPE when
//   decoding over a cache (else 0..Tq-1).
#pragma once
#include <optional>
#include <string_view>

#include <ctgrad/models/layers/attention_pooling.hpp>
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/models/layers/norm.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/attention.hpp>
#include <ctgrad/ops/index.hpp>
#include <ctgrad/ops/position.hpp>
#include <ctgrad/ops/rotary.hpp>
#include <ctgrad/ops/shape.hpp>

namespace ctgrad::layers {

// Parameter scope names of the projections and QK-norms (Hugging Face Llama's: q_proj, k_proj, ...).
// How a query and a key score: scaled dot product, or additive w_v^T tanh(q + k) on the heads'
// projections (Bahdanau's; "<scope>.w_v.weight" [1, d_head], shared by the heads; d2l 11.3).
enum class AttentionScore : std::uint8_t { dot, additive };

struct AttentionNames {
  std::string_view q = "wq", k = "wk", v = "wv", o = "wo", qkv = "qkv", q_norm = "q_norm", k_norm = "k_norm";
};

struct MultiHeadAttentionOptions {
  int heads = 8;
  Real dropout = 0;          // on the probabilities, in training
  bool causal = false;
  bool bias = true;          // biases of the projections
  std::optional<bool> out_bias;  // the output projection's, when not `bias` (Qwen2: q, k, v only)
  bool fused_qkv = false;    // one [3d, d] projection (GPT-2); self-attention only
  bool scale_scores = true;  // T5 does not scale scores by 1/sqrt(d_head)
  Init init = init::xavier_uniform();      // q, k, v (or qkv) projection weights
  Init out_init = init::xavier_uniform();  // output projection (GPT-2 scales it by depth)
  std::optional<Init> q_init;              // the query projection's, when not `init` (T5 folds 1/sqrt(d_head) into it)
  int kv_heads = 0;                        // key/value heads, dividing heads (0: heads; 1: multi-query)
  std::optional<RopeOptions> rope;         // rotary positions on q and k (self-attention)
  bool qk_norm = false;                    // RMSNorm over d_head on q and k, before RoPE
  Real qk_norm_eps = 1e-6;
  int window = 0;                          // with causal: each query sees the last `window` positions
  Real softcap = 0;                        // scores softcap * tanh(s / softcap) (0: none)
  AttentionNames names{};
  AttentionScore score = AttentionScore::dot;
  constexpr int kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
};

// Keys and values [Batch, heads, SeqKV, d_head] of incremental decoding. Not fixed: the past rows
// plus room for this step's Tq (SeqKV = past + Tq); attention writes this step's keys and values
// into the room and returns the updated caches. Fixed: complete keys and values (cross-attention
// over an encoded source, from project_kv), used as they are.
struct KvCache {
  Value k, v;
  bool fixed = false;
};

struct AttentionInputs {
  Value q;
  std::optional<Value> kv;     // none: self-attention on q
  std::optional<Value> mask;   // int32, 0 = masked
  std::optional<Value> bias;   // real, added to the scaled scores
  std::optional<KvCache> cache;
  std::optional<Value> positions;  // int32 [Tq]: the queries' positions (RoPE over a cache)
  bool weights = false;        // also return the probabilities
};

struct AttentionResult {
  Value out;                      // [Batch, Tq, d]
  std::optional<KvCache> cache;   // the updated caches (a cache that is not fixed)
  std::optional<Value> weights;   // [Batch, heads, Tq, Tk], no dropout
};

namespace detail {
// [B, T, d] -> [B, heads, T, d/heads]
constexpr Value split_heads(Value x, int heads) {
  const Shape s = x.shape();
  return transpose(reshape(x, {s[0], s[1], heads, s[2].coef / heads}), 1, 2);
}
}  // namespace detail

constexpr AttentionResult multi_head_attention(const Scope& s, const AttentionInputs& in, const MultiHeadAttentionOptions& o = {}) {
  const auto at = s.enter();
  const Shape qs = in.q.shape();
  const Dim d = qs.back(1);
  const int kv_heads = o.kv_heads_or_heads();
  auto fail = [&](Msg m) { s.b->fail(Msg("multi_head_attention in '").add(s.prefix).add("': ").add(m.view()), s.loc); };
  if (o.heads <= 0 || d.coef % o.heads) fail(Msg("d_model ").add(d).add(" is not a multiple of ").add(o.heads).add(" heads"));
  if (kv_heads <= 0 || o.heads % kv_heads)
    fail(Msg("kv_heads ").add(kv_heads).add(" must divide heads ").add(o.heads).add(" (grouped-query attention)"));
  if (o.fused_qkv && in.kv) fail(Msg("fused_qkv is for self-attention, but kv was given"));
  if (o.fused_qkv && kv_heads != o.heads) fail(Msg("fused_qkv needs kv_heads = heads"));
  if (o.rope && in.kv) fail(Msg("rope is for self-attention, but kv was given"));
  if (o.rope && in.cache && !in.positions) fail(Msg("rope over a cache needs the queries' positions (AttentionInputs::positions)"));
  const bool additive = o.score == AttentionScore::additive;
  if (additive && (o.causal || o.window || o.softcap.value != 0 || o.rope || o.qk_norm || in.cache || o.fused_qkv || kv_heads != o.heads))
    fail(Msg("additive scores take masks and a bias; not causal, window, softcap, rope, qk_norm, caches, fused_qkv or kv_heads"));
  const std::int64_t dh = o.heads > 0 ? d.coef / o.heads : 1;
  const Dim d_kv = Dim(dh * kv_heads);
  const LinearOptions lin{.bias = o.bias, .init = o.init}, out_lin{.bias = o.out_bias.value_or(o.bias), .init = o.out_init},
      q_lin{.bias = o.bias, .init = o.q_init ? *o.q_init : o.init};
  const Value kv_in = in.kv ? *in.kv : in.q;
  const bool fixed = in.cache && in.cache->fixed;
  // Without caches or weights to return, heads stay interleaved in each row ([B, T, H, d_head],
  // the attention op's seq_first layout): split and merge are then views, no transposes; and a
  // fused projection's q, k, v are read in place (packed_qkv), not copied out of it. RoPE and
  // QK-norm act on q and k first, so they take the separate path.
  const bool seq_first = !in.cache && !in.weights && !additive;
  const bool per_head = o.rope || o.qk_norm;
  const bool packed = o.fused_qkv && seq_first && !per_head;
  Value q, k, v, qkv;
  if (fixed) {
    q = linear(s.scope(o.names.q), in.q, d, q_lin);
    k = in.cache->k, v = in.cache->v;
  } else if (packed) {
    qkv = reshape(linear(s.scope(o.names.qkv), in.q, Dim(3) * d, lin), {qs[0], qs[1], 3, o.heads, d.coef / o.heads});
  } else if (o.fused_qkv) {
    auto parts = split<3>(linear(s.scope(o.names.qkv), in.q, Dim(3) * d, lin), -1);
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    q = linear(s.scope(o.names.q), in.q, d, q_lin);
    k = linear(s.scope(o.names.k), kv_in, d_kv, lin);
    v = linear(s.scope(o.names.v), kv_in, d_kv, lin);
  }
  // [B, T, H * dh] -> [B, T, H, dh] (a view), QK-norm and RoPE there (q and k), then heads
  // outer ([B, H, T, dh]) unless seq_first.
  auto split = [&](Value x, int heads, std::optional<std::string_view> norm_scope) {
    const Shape xs = x.shape();
    x = reshape(x, {xs[0], xs[1], heads, dh});
    if (norm_scope) {
      if (o.qk_norm) x = norm(s.scope(*norm_scope), x, {.kind = NormKind::rms, .eps = o.qk_norm_eps});
      if (o.rope) x = in.positions ? rope(x, *in.positions, *o.rope) : rope(x, *o.rope);
    }
    return seq_first ? x : transpose(x, 1, 2);
  };
  if (!packed) q = split(q, o.heads, o.names.q_norm);
  AttentionResult r;
  if (!fixed && !packed) {
    k = split(k, kv_heads, in.kv ? std::nullopt : std::optional<std::string_view>(o.names.k_norm));
    v = split(v, kv_heads, std::nullopt);
  }
  if (in.cache && !fixed) {
    k = overwrite_tail(in.cache->k, k, 2);
    v = overwrite_tail(in.cache->v, v, 2);
    r.cache = KvCache{k, v};
  }
  const AttentionOptions ao{.scale = o.scale_scores ? Real(1 / ops::const_sqrt(double(dh))) : Real(1.0),
                            .dropout = o.dropout, .causal = o.causal, .window = o.window, .softcap = o.softcap,
                            .seq_first = seq_first, .packed_qkv = packed};
  // q, k, v (or the packed qkv), then the mask and the bias that were given.
  auto attend = [&](auto... qkv_in) {
    const Loc here = Loc::current();
    return in.mask && in.bias ? ops::apply<AttentionOp>({qkv_in..., *in.mask, *in.bias}, ao, here)
           : in.mask          ? ops::apply<AttentionOp>({qkv_in..., *in.mask}, ao, here)
           : in.bias          ? ops::apply<AttentionOp>({qkv_in..., *in.bias}, ao, here)
                              : ops::apply<AttentionOp>({qkv_in...}, ao, here);
  };
  Value heads_out{};
  if (additive) {  // [B, H, Tq, Tk] scores from [B, H, T, d_head] heads, then as the op: mask, bias, softmax, dropout
    Value scores = additive_scores(q, k, s.scope("w_v").param("weight", {1, dh}, init::xavier_uniform()));
    if (in.mask) scores = masked_fill(scores, *in.mask, -1e9);
    if (in.bias) scores = scores + *in.bias;
    const Value p = softmax(scores);
    if (in.weights) r.weights = p;
    heads_out = matmul(dropout(p, o.dropout), v);
  } else {
    heads_out = packed ? attend(qkv) : attend(q, k, v);
    if (in.weights) r.weights = attention_weights(q, k, in.mask, in.bias, ao);
  }
  const Value merged = seq_first ? heads_out : transpose(heads_out, 1, 2);
  r.out = linear(s.scope(o.names.o), reshape(merged, {qs[0], qs[1], d}), d, out_lin);
  return r;
}

// The keys and values multi_head_attention(s, {.q, .kv = kv_in}) computes, [Batch, heads, Tk,
// d_head], with the same parameters: computed once per source for incremental decoding.
constexpr KvCache project_kv(const Scope& s, Value kv_in, const MultiHeadAttentionOptions& o = {}) {
  const auto at = s.enter();
  const Dim d = kv_in.shape().back(1);
  const int kv_heads = o.kv_heads_or_heads();
  const Dim d_kv = Dim(d.coef / o.heads * kv_heads);
  const LinearOptions lin{.bias = o.bias, .init = o.init};
  return {detail::split_heads(linear(s.scope(o.names.k), kv_in, d_kv, lin), kv_heads),
          detail::split_heads(linear(s.scope(o.names.v), kv_in, d_kv, lin), kv_heads), true};
}

// T5's relative position bias for one stack: one learned table "<scope>.weight" [buckets, heads],
// shared by every layer of the stack (pass the result as each layer's AttentionInputs::bias).
// Returns the bias [1, heads, Tq, Tk] for queries and keys of these lengths.
constexpr Value relative_bias(const Scope& s, int heads, Dim queries, Dim keys, RelativeBiasOptions o = {},
                              Init i = init::normal(0.02)) {
  const auto at = s.enter();
  return relative_position_bias(s.param("weight", {o.buckets, heads}, i), queries, keys, o);
}

}  // namespace ctgrad::layers
