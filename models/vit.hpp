// Vision Transformer (d2l's ViT chapter), declared in the DSL:
//   patches = patch_embed(images [B, C, H, W])       [B, N, d]   N = (H/p)(W/p), a conv with kernel = stride = p
//   x = concat(<cls>, patches) + learned positions    [B, N+1, d]  (no <cls> when pooling by mean)
//   x = dropout(x); per block vit.<l>:  x += attn(ln_1(x));  x += mlp(ln_2(x))   pre-norm, GELU MLP
//   logits = head(ln(x[:, 0]))  or  head(ln(mean over patches))                  [B, classes]
#pragma once
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/layers.hpp>

namespace ctgrad::models {

struct VitConfig {
  int image = 28, channels = 1, patch = 4, d_model = 128, n_layer = 4, heads = 4, d_mlp = 256, classes = 10;
  double dropout = 0.1;
  bool mean_pool = false;  // d2l exercise 2: classify from the mean of the patch representations
};

// The benchmark shape (7x7 patches of 4).
inline constexpr VitConfig kVitSmall{};
// 4x4 patches of 7: a third of the tokens; 1,030 against 224 training images/s for `small`
// measured on 2 cores. The Fashion-MNIST default.
inline constexpr VitConfig kVitFast{.patch = 7};
inline constexpr VitConfig kVitTiny{.image = 28, .channels = 1, .patch = 7, .d_model = 32, .n_layer = 2, .heads = 2, .d_mlp = 64,
                                    .classes = 10, .dropout = 0};

template <VitConfig C>
constexpr auto vit = [] {
  using namespace layers;
  const Loc loc = Loc::current();
  Builder g;
  Value images = g.input("images", {Batch, C.channels, C.image, C.image});  // [B, C, H, W]
  Value labels = g.input("labels", {Batch}, {.dtype = DType::index});
  const int n = (C.image / C.patch) * (C.image / C.patch), d = C.d_model;
  const Scope pe = g.scope("patch_embed");
  Value x = patch_embed(images, pe.param("weight", {d, C.channels * C.patch * C.patch}, init::xavier_uniform(), loc),
                        pe.param("bias", {d}, init::zeros(), loc), C.patch, loc);  // [B, N, d]
  if (!C.mean_pool) {
    Value cls = g.param("cls", {1, 1, d}, init::zeros(), loc);
    x = concat({broadcast_to(cls, slice(x, 1, 0, 1, loc), loc), x}, 1, loc);  // [B, N+1, d]
  }
  Value pos = g.param("pos", {1, C.mean_pool ? n : n + 1, d}, init::normal(0.02), loc);
  x = dropout(add(x, pos, loc), C.dropout, loc);
  const auto attn = MultiHeadAttentionOptions().heads(C.heads).dropout(C.dropout);
  const auto mlp = FeedForwardOptions().d_ff(C.d_mlp).activation(Act::gelu).dropout(C.dropout);
  for (int l = 0; l < C.n_layer; ++l) {
    const Scope b = g.scope("vit", l);
    Value a = norm(b.scope("ln_1"), x, {}, loc);
    x = add(x, dropout(multi_head_attention(b.scope("attn"), a, a, std::nullopt, attn, nullptr, nullptr, loc), C.dropout, loc), loc);
    x = add(x, dropout(feed_forward(b.scope("mlp"), norm(b.scope("ln_2"), x, {}, loc), mlp, loc), C.dropout, loc), loc);
  }
  Value pooled = C.mean_pool ? mean(x, 1, {}, loc) : reshape(slice(x, 1, 0, 1, loc), {Batch, d}, loc);  // [B, d]
  Value logits = linear(g.scope("head"), norm(g.scope("head_norm"), pooled, {}, loc), C.classes, {}, loc);
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, labels, {}, loc));
  return g;
};

}  // namespace ctgrad::models
