// A small decoder-only character language model assembled from layers: the `ctgrad train charlm`
// toy model (the full GPT is its own issue). Pre-norm blocks, learned positions, output projection
// tied to the token embedding. Static sizes are presets; batch and context are runtime dims.
#pragma once
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/layers.hpp>

namespace ctgrad::models {

struct CharLmPreset {
  int vocab, d_model, heads, layers, d_ff, max_context;
};

template <CharLmPreset P>
constexpr auto charlm = [] {
  using namespace layers;
  Builder g;
  Value ids = g.input("ids", {Batch, Seq}, {.dtype = DType::index});
  Value targets = g.input("targets", {Batch, Seq}, {.dtype = DType::index});
  Value table = embedding_table(g.scope("tok_emb"), P.vocab, P.d_model, init::normal(0.02));
  Value x = add_learned_positions(g.scope("pos_emb"), embed(table, ids), P.max_context);
  const auto res = ResidualOptions().norm(Norm::pre);
  for (int i = 0; i < P.layers; ++i) {
    Scope b = g.scope("block", i);
    x = residual(b.scope("ln1"), x, [&](Value h) {
      return multi_head_attention(b.scope("attn"), h, h, std::nullopt, MultiHeadAttentionOptions().heads(P.heads).fused_qkv(true).causal(true));
    }, res);
    x = residual(b.scope("ln2"), x, [&](Value h) {
      return feed_forward(b.scope("mlp"), h, FeedForwardOptions().d_ff(P.d_ff).activation(Act::gelu_tanh));
    }, res);
  }
  Value logits = matmul(norm(g.scope("ln_f"), x), table, {.trans_b = true});  // tied to the embedding
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, targets));
  return g;
};

inline constexpr CharLmPreset kCharLmTiny{128, 64, 4, 2, 256, 64};
inline constexpr CharLmPreset kCharLmSmall{128, 128, 4, 4, 512, 128};

}  // namespace ctgrad::models
