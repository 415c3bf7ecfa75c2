// The GPT's config and presets (models/gpt.hpp), apart from the graph: what a model folder's
// config.json maps to (pretrained/hf_model.hpp) without the DSL's headers.
#pragma once
#include <ctgrad/models/layers/options.hpp>

namespace ctgrad::models {

// Shapes and topology only: everything else is a hyperparameter.
struct GptConfig {
  int vocab = 256, n_layer = 4, n_head = 4, d_model = 128, context = 64;
  int d_ff = 0;         // the MLP's hidden width (0: 4 d_model, or 2/3 of it gated, about equal parameters)
  bool bias = true;     // biases in the linear layers (GPT-2 has them)
  int kv_heads = 0;     // key/value heads, dividing n_head (0: n_head; fewer: grouped-query attention)
  bool qk_norm = false; // RMSNorm over each head's q and k
  layers::Mixer mixer = layers::Mixer::attention;  // ssm: a selective state-space layer in each block (about attention's parameters)
  int ssm_state = 16;   // its state per channel (N)
  layers::Arch arch{.norm = layers::Norm::pre, .act = layers::Act::gelu_tanh, .pos = layers::Pos::learned, .tie = true};
};

// The presets `ctgrad train gpt --set size=...` chooses from.
inline constexpr GptConfig kGptTiny{.vocab = 256, .n_layer = 2, .n_head = 2, .d_model = 32, .context = 32};
// nanoGPT's "baby GPT" CPU recipe (its character vocabulary padded to 256, as nanoGPT pads GPT-2's).
inline constexpr GptConfig kGptSmall{.vocab = 256, .n_layer = 4, .n_head = 4, .d_model = 128, .context = 64};
inline constexpr GptConfig kGptMedium{.vocab = 8192, .n_layer = 6, .n_head = 8, .d_model = 512, .context = 256};

}  // namespace ctgrad::models
