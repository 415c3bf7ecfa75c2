// Vision Transformer (d2l's ViT chapter), declared in the DSL:
//   patches = patch_embed(images [B, C, H, W])       [B, N, d]   N = (H/p)(W/p), a conv with kernel = stride = p
//   x = concat(<cls>, patches) + learned positions    [B, N+1, d]  (no <cls> when pooling by mean)
//   x = dropout(x); per block vit.<l>:  x += attn(ln_1(x));  x += mlp(ln_2(x))   pre-norm, GELU MLP
//   logits = head(ln(x[:, 0]))  or  head(ln(mean over patches))                  [B, classes]
// Hyperparameters: dropout (0.1: embeddings, attention probabilities, MLP hidden, residual
// branches), label_smoothing (0), norm_eps (1e-5).
#pragma once
#include <ctgrad/graph/program.hpp>
#include <ctgrad/ops/ops.hpp>
#include <ctgrad/models/layers/layers.hpp>
#include <ctgrad/models/vit_config.hpp>

namespace ctgrad::models {

namespace vit_inputs {
inline constexpr InputName images{"images", DType::real};   // [Batch, C, H, W], normalised pixels
inline constexpr InputName labels{"labels", DType::index};  // [Batch] class ids
}  // namespace vit_inputs

constexpr Builder vit(const VitConfig& C) {
  using namespace layers;
  Builder g;
  Value images = g.input(vit_inputs::images, {Batch, C.channels, C.image, C.image});  // [B, C, H, W]
  Value labels = g.input(vit_inputs::labels, {Batch});
  const Real p = g.hyper("dropout", 0.1), eps = g.hyper("norm_eps", 1e-5);
  const int n = (C.image / C.patch) * (C.image / C.patch), d = C.d_model;
  const Scope pe = g.scope("patch_embed");
  const Value pw = pe.param("weight", {d, C.channels * C.patch * C.patch}, init::xavier_uniform());
  const Value pb = pe.param("bias", {d}, init::zeros());
  Value x = patch_embed(images, pw, pb, C.patch);  // [B, N, d]
  if (!C.mean_pool) {
    Value cls = g.param("cls", {1, 1, d}, init::zeros());
    x = concat({broadcast_to(cls, {Batch, 1, d}), x}, 1);  // [B, N+1, d]
  }
  const int tokens = C.mean_pool ? n : n + 1;
  if (C.arch.pos == Pos::learned) x = add(x, g.param("pos", {1, tokens, d}, init::normal(0.02)));
  if (C.arch.pos == Pos::sinusoidal) x = add(x, sinusoidal_positions(g, Dim(tokens), d));
  x = dropout(x, p);
  const TransformerBlockOptions block{.attention = {.heads = C.heads, .dropout = p},
                                      .ffn = {.d_ff = gated(C.arch.act) ? gated_width(C.d_mlp) : C.d_mlp, .activation = C.arch.act, .dropout = p},
                                      .placement = C.arch.norm,
                                      .norm = {.kind = C.arch.norm_kind, .eps = eps},
                                      .dropout = p};
  for (int l = 0; l < C.n_layer; ++l) x = transformer_block(g.scope("vit", l), {.x = x}, block).x;
  Value pooled = C.mean_pool ? mean(x, 1) : reshape(slice(x, 1, 0, 1), {Batch, d});  // [B, d]
  if (C.arch.norm == Norm::pre) pooled = norm(g.scope("head_norm"), pooled, {.kind = C.arch.norm_kind, .eps = eps});
  Value logits = linear(g.scope("head"), pooled, C.classes);
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, labels, {.label_smoothing = g.hyper("label_smoothing", 0)}));
  return g;
}

}  // namespace ctgrad::models
