// The encoder-decoder Transformer's compiled architecture variants (apps/variant_registry.hpp).
#pragma once
#include <ctgrad/models/transformer.hpp>

#include "../variant_registry.hpp"

namespace ctgrad::cli {

struct TransformerPrograms {
  models::TransformerConfig config;
  MakeProgram train, encoder, step, maps;  // transformer(config), its decoding graphs, its attention maps
};

#ifdef CTGRAD_VARIANT_ORDER
inline constexpr int kTransformerOrderCopy = CTGRAD_VARIANT_ORDER, kTransformerOrderSmall = CTGRAD_VARIANT_ORDER,
                     kTransformerOrderBase = CTGRAD_VARIANT_ORDER;
#else
inline constexpr int kTransformerOrderCopy = 1, kTransformerOrderSmall = 1, kTransformerOrderBase = 0;
#endif

template <models::TransformerConfig P, int Order>
inline constexpr auto transformer_space = models::transformer_variant_space(P, Order);

}  // namespace ctgrad::cli
