// BERT's config and presets (models/bert.hpp), apart from the graph: what a model folder's
// config.json maps to (pretrained/hf_model.hpp) without the DSL's headers.
#pragma once

namespace ctgrad::models {

// Shapes and topology only: everything else is a hyperparameter.
struct BertConfig {
  int vocab = 8000, n_layer = 4, heads = 4, d_model = 256, d_ff = 1024, context = 128, segments = 2;
  bool pre_norm = false;       // the original BERT is post-norm
  bool next_sentence = false;  // pretraining adds next-sentence prediction (BERT; RoBERTa drops it)
};
constexpr BertConfig with_next_sentence(BertConfig c) {
  c.next_sentence = true;
  return c;
}
constexpr BertConfig with_pre_norm(BertConfig c) {
  c.pre_norm = true;
  return c;
}

// The presets `ctgrad train bert --set size=...` chooses from.
inline constexpr BertConfig kBertTiny{.vocab = 512, .n_layer = 2, .heads = 2, .d_model = 32, .d_ff = 64, .context = 32};
inline constexpr BertConfig kBertSmall{.vocab = 8000, .n_layer = 4, .heads = 4, .d_model = 256, .d_ff = 1024, .context = 128};
// BERT-base's shape (110 M parameters with its 30,522-token vocabulary).
inline constexpr BertConfig kBertBase{.vocab = 30522, .n_layer = 12, .heads = 12, .d_model = 768, .d_ff = 3072, .context = 512};

}  // namespace ctgrad::models
