// The ViT's compiled architecture variants (apps/variant_registry.hpp).
#pragma once
#include <ctgrad/models/vit.hpp>

#include "../variant_registry.hpp"

namespace ctgrad::cli {

struct VitPrograms {
  models::VitConfig config;
  MakeProgram train;  // vit(config)
};

#ifdef CTGRAD_VARIANT_ORDER
inline constexpr int kVitOrder = CTGRAD_VARIANT_ORDER;
#else
inline constexpr int kVitOrder = 1;
#endif

template <models::VitConfig P>
inline constexpr auto vit_space = models::vit_variant_space(P, kVitOrder);

}  // namespace ctgrad::cli
