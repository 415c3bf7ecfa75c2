// The GPT's compiled architecture variants (apps/variant_registry.hpp): per preset, every variant changing
// at most `order` of the keys norm, norm_kind, act, pos, heads, tie_embeddings.
#pragma once
#include <ctgrad/models/gpt.hpp>

#include "../variant_registry.hpp"

namespace ctgrad::cli {

struct GptPrograms {
  models::GptConfig config;
  MakeProgram train, decoder;  // gpt<config>, gpt_decoder<config>
};

// The orders compiled (CMake's CTGRAD_VARIANT_ORDER sets one for every preset).
#ifdef CTGRAD_VARIANT_ORDER
inline constexpr int kGptOrderTiny = CTGRAD_VARIANT_ORDER, kGptOrderSmall = CTGRAD_VARIANT_ORDER, kGptOrderMedium = CTGRAD_VARIANT_ORDER;
#else
inline constexpr int kGptOrderTiny = 1, kGptOrderSmall = 2, kGptOrderMedium = 0;
#endif

template <models::GptConfig P, int Order>
inline constexpr auto gpt_space = models::gpt_variant_space(P, Order);

}  // namespace ctgrad::cli
