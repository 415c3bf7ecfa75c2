// The Transformer block, in every placement the model families use:
//   encoder / decoder-only block:  x = r1(x, self-attention);               x = r2(x, feed-forward)
//   decoder block (cross=true):    x = r1(x, self-attention); x = r2(x, cross-attention over the
//                                  memory);                                 x = r3(x, feed-forward)
// where r_i is a residual connection (pre- or post-norm, residual dropout) whose norm is
// "<scope>.<names.norm><i>" (ln_1, ln_2, ln_3). Sublayers are "<scope>.<names.self>",
// "<scope>.<names.cross>", "<scope>.<names.ffn>": GPT-2's h.3.attn / h.3.mlp, the original
// Transformer's enc.3.self / enc.3.ffn. One block function for GPT, ViT, BERT and the
// encoder-decoder; an ablation (norm placement, norm kind, activation, the token mixer: attention
// or a selective state-space layer) is an options change.
#pragma once
#include <optional>
#include <string_view>

#include <ctgrad/models/layers/attention.hpp>
#include <ctgrad/models/layers/feed_forward.hpp>
#include <ctgrad/models/layers/residual.hpp>
#include <ctgrad/models/layers/ssm.hpp>

namespace ctgrad::layers {

struct BlockNames {
  std::string_view self = "attn", cross = "cross", ffn = "mlp", norm = "ln_", ssm = "ssm";
};

struct TransformerBlockOptions {
  MultiHeadAttentionOptions attention{};  // self-attention (and cross-attention, not causal)
  Mixer mixer = Mixer::attention;        // ssm: a selective state-space layer "<scope>.<names.ssm>" instead of self-attention
  SelectiveSsmOptions ssm{};
  FeedForwardOptions ffn{};
  Norm placement = Norm::pre;
  NormOptions norm{};
  Real dropout = 0;        // on each sublayer's output, before the residual add
  bool cross = false;      // a decoder block of an encoder-decoder model
  BlockNames names{};
};

struct BlockInputs {
  Value x;                              // [Batch, T, d]
  std::optional<Value> mask, bias;      // self-attention
  std::optional<Value> memory;          // the encoder's output [Batch, S, d] (cross blocks)
  std::optional<Value> memory_mask;     // over the memory's keys
  std::optional<KvCache> cache;         // decoding: self-attention keys and values
  std::optional<Value> positions;       // decoding with RoPE: the tokens' positions, int32 [T]
  std::optional<KvCache> cross_cache;   // decoding: the memory's keys and values (fixed)
  std::optional<Value> ssm_state;       // decoding with Mixer::ssm: the state after the tokens before [Batch, E, N]
  bool weights = false;                 // also return the attention probabilities
};

struct BlockResult {
  Value x;
  std::optional<KvCache> cache;                      // the updated self-attention cache
  std::optional<Value> ssm_state;                    // Mixer::ssm: the state after the last token
  std::optional<Value> self_weights, cross_weights;  // when asked for
};

constexpr BlockResult transformer_block(const Scope& s, const BlockInputs& in, const TransformerBlockOptions& o = {}) {
  const auto at = s.enter();
  if (o.cross && !in.memory && !in.cross_cache)
    s.b->fail(Msg("transformer_block '").add(s.prefix).add("': a cross-attention block needs the memory or its keys and values"), s.loc);
  const ResidualOptions res{.placement = o.placement, .norm = o.norm, .dropout = o.dropout};
  auto norm_scope = [&](int i) {
    std::string n(o.names.norm);
    n += char('0' + i);
    return s.scope(n, s.loc);
  };
  BlockResult r;
  int sub = 1;
  if (o.mixer == Mixer::ssm && (o.cross || in.mask || in.bias || in.cache || in.weights))
    s.b->fail(Msg("transformer_block '").add(s.prefix).add("': mixer=ssm is causal by construction: no cross-attention, masks, biases, caches or weights"), s.loc);
  Value x = residual(norm_scope(sub++), in.x, [&](Value h) {
    if (o.mixer == Mixer::ssm) {
      const SsmResult m = selective_ssm(s.scope(o.names.ssm, s.loc), h, o.ssm, {.state = in.ssm_state});
      r.ssm_state = m.state;
      return m.out;
    }
    AttentionResult a = multi_head_attention(s.scope(o.names.self, s.loc),
                                             {.q = h, .mask = in.mask, .bias = in.bias, .cache = in.cache, .positions = in.positions, .weights = in.weights},
                                             o.attention);
    r.cache = a.cache, r.self_weights = a.weights;
    return a.out;
  }, res);
  if (o.cross) {
    MultiHeadAttentionOptions cross = o.attention;
    cross.causal = false, cross.fused_qkv = false, cross.window = 0;
    cross.rope.reset();  // positions of the memory are the encoder's business
    x = residual(norm_scope(sub++), x, [&](Value h) {
      AttentionResult a = multi_head_attention(
          s.scope(o.names.cross, s.loc), {.q = h, .kv = in.memory, .mask = in.memory_mask, .cache = in.cross_cache, .weights = in.weights},
          cross);
      r.cross_weights = a.weights;
      return a.out;
    }, res);
  }
  r.x = residual(norm_scope(sub), x, [&](Value h) { return feed_forward(s.scope(o.names.ffn, s.loc), h, o.ffn); }, res);
  return r;
}

}  // namespace ctgrad::layers
