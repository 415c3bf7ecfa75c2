// The Llama's compiled architecture variants (apps/variant_registry.hpp): per preset, every
// variant changing at most `order` of the keys kv_heads, rope, qk_norm, window, bias,
// tie_embeddings.
#pragma once
#include <ctgrad/models/llama.hpp>

#include "../variant_registry.hpp"

namespace ctgrad::cli {

struct LlamaPrograms {
  models::LlamaConfig config;
  MakeProgram train, decoder;  // llama<config>, llama_decoder<config>
};

#ifdef CTGRAD_VARIANT_ORDER
inline constexpr int kLlamaOrderTiny = CTGRAD_VARIANT_ORDER, kLlamaOrderSmall = CTGRAD_VARIANT_ORDER, kLlamaOrderMedium = CTGRAD_VARIANT_ORDER;
#else
inline constexpr int kLlamaOrderTiny = 1, kLlamaOrderSmall = 1, kLlamaOrderMedium = 0;
#endif

template <models::LlamaConfig P, int Order>
inline constexpr auto llama_space = models::llama_variant_space(P, Order);

}  // namespace ctgrad::cli
