// Compiles this unit's share of the ViT's variants and registers them.
#include "vit.hpp"

#include "register.hpp"

namespace ctgrad::cli {
namespace {

template <models::VitConfig C>
struct Make {
  static constexpr auto train = freeze<models::vit, C>();
  static VitPrograms programs() { return {C, make_program<train>}; }
};

template <models::VitConfig P>
bool add(const char* preset) {
  return register_variants<VitPrograms, P, vit_space<P>, Make>(preset);
}

#ifndef CTGRAD_SMOKE_PRESETS
const bool registered = add<models::kVitTiny>("size=tiny") && add<models::kVitFast>("size=fast") && add<models::kVitSmall>("size=small");
#else
const bool registered = add<models::kVitTiny>("size=tiny");
#endif

}  // namespace
}  // namespace ctgrad::cli
