// T5's config and presets (models/t5.hpp), apart from the graph: what a model folder's
// config.json maps to (pretrained/hf_model.hpp) without the DSL's headers.
#pragma once
#include <ctgrad/models/layers/options.hpp>

namespace ctgrad::models {

// Shapes and topology only.
struct T5Config {
  int vocab = 8100, n_layer = 4, n_dec_layer = 4, d_model = 256, heads = 4, d_ff = 1024;
  int buckets = 32, max_distance = 128;
  bool tied = false;  // T5 v1.0: the output projection is the shared embedding, y scaled by d^-1/2
  layers::Act ffn_act = layers::Act::gated_gelu;  // v1.1's gated GELU (tanh form); relu: v1.0's
  int pad = 0;        // padding, ignored by the loss; also the decoder's start token
};
constexpr T5Config with_tied_embeddings(T5Config c) {
  c.tied = true;
  return c;
}

// Sentinels are the vocabulary's last 100 ids: <extra_id_0> = vocab - 1, <extra_id_i> = vocab - 1 - i.
inline constexpr int kT5Sentinels = 100;

inline constexpr T5Config kT5Tiny{.vocab = 400 + kT5Sentinels, .n_layer = 2, .n_dec_layer = 2, .d_model = 32, .heads = 2, .d_ff = 64};
inline constexpr T5Config kT5Small{.vocab = 8000 + kT5Sentinels, .n_layer = 4, .n_dec_layer = 4, .d_model = 256, .heads = 4, .d_ff = 1024};
// The original T5-small's shape (6 + 6 layers, d 512, 8 heads, d_ff 2048, a 32k vocabulary).
inline constexpr T5Config kT5SmallOriginal{.vocab = 32000 + kT5Sentinels, .n_layer = 6, .n_dec_layer = 6, .d_model = 512, .heads = 8, .d_ff = 2048};

}  // namespace ctgrad::models
