// The Llama's config and presets (models/llama.hpp), apart from the graph: what a model folder's
// config.json maps to (pretrained/hf_model.hpp) without the DSL's headers.
#pragma once
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/rope_scaling.hpp>

namespace ctgrad::models {

// Rotary frequencies for contexts past the pretraining one (Hugging Face's rope_scaling; ops/rotary.hpp).
struct LlamaRopeScaling {
  RopeScaling type = RopeScaling::none;
  double factor = 1, low_freq_factor = 1, high_freq_factor = 4, original_context = 8192;
};

struct LlamaConfig {
  int vocab = 256, n_layer = 4, n_head = 4, kv_heads = 2, d_model = 128, context = 64;
  int d_ff = layers::gated_width(4 * 128);  // SwiGLU's hidden width (2/3 of 4d, as Llama)
  double rope_theta = 10000;
  bool rope_interleaved = false;
  bool qk_norm = false;
  int window = 0;       // sliding-window attention (0: the whole context)
  bool bias = false;    // biases in the linear layers
  bool qkv_bias = false;  // biases in the q, k and v projections alone (Qwen2)
  LlamaRopeScaling rope_scaling{};
  bool tie = false;     // the head is the token embedding's transpose
  int moe_experts = 0;  // a mixture of SwiGLU experts of width d_ff in every layer (0: a dense MLP)
  int moe_top_k = 2;    // experts per token
  double moe_capacity = 1.25;  // capacity factor: an expert's rows are tokens x top_k / experts x this
  int ffn_mult = 1;     // the dense MLP's width is d_ff x this (a dense model of a MoE's active or total size)
};

// The presets `ctgrad train llama --set size=...` chooses from. small: the GPT main job's sizes
// (4 layers, d 128, context 64) as a Llama, 4 query heads over 2 key/value heads.
inline constexpr LlamaConfig kLlamaTiny{.vocab = 256, .n_layer = 2, .n_head = 4, .kv_heads = 2, .d_model = 32, .context = 32,
                                        .d_ff = layers::gated_width(4 * 32)};
inline constexpr LlamaConfig kLlamaSmall{.vocab = 256, .n_layer = 4, .n_head = 4, .kv_heads = 2, .d_model = 128, .context = 64,
                                         .d_ff = layers::gated_width(4 * 128)};
inline constexpr LlamaConfig kLlamaMedium{.vocab = 8192, .n_layer = 6, .n_head = 8, .kv_heads = 2, .d_model = 512, .context = 256,
                                          .d_ff = layers::gated_width(4 * 512)};

}  // namespace ctgrad::models
