// The ViT's config and presets (models/vit.hpp), apart from the graph: what a model folder's
// config.json maps to (pretrained/hf_model.hpp) without the DSL's headers.
#pragma once
#include <ctgrad/models/layers/options.hpp>

namespace ctgrad::models {

// Shapes and topology only. The architecture (arch) is d2l's ViT; an ablation changes it:
// post-norm drops head_norm (the blocks end normalised), sinusoidal or no
// positions drop "pos".
struct VitConfig {
  int image = 28, channels = 1, patch = 4, d_model = 128, n_layer = 4, heads = 4, d_mlp = 256, classes = 10;
  bool mean_pool = false;  // d2l exercise 2: classify from the mean of the patch representations
  layers::Arch arch{.norm = layers::Norm::pre, .act = layers::Act::gelu, .pos = layers::Pos::learned};
};

// The benchmark shape (7x7 patches of 4).
inline constexpr VitConfig kVitSmall{};
// 4x4 patches of 7: a third of the tokens; 1,030 against 224 training images/s for `small`
// measured on 2 cores. The Fashion-MNIST default.
inline constexpr VitConfig kVitFast{.patch = 7};
inline constexpr VitConfig kVitTiny{.image = 28, .channels = 1, .patch = 7, .d_model = 32, .n_layer = 2, .heads = 2, .d_mlp = 64, .classes = 10};

}  // namespace ctgrad::models
