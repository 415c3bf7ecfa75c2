// Compiles this unit's share of the GPT's variants and registers them (apps/variants/register.hpp).
#include "gpt.hpp"

#include "register.hpp"

namespace ctgrad::cli {
namespace {

template <models::GptConfig C>
struct Make {
  static constexpr auto train = freeze<models::gpt<C>>();
  static constexpr auto decoder = freeze<models::gpt_decoder<C>>();
  static GptPrograms programs() { return {C, make_program<train>, make_program<decoder>}; }
};

template <models::GptConfig P, int Order>
bool add(const char* preset) {
  return register_variants<GptPrograms, P, gpt_space<P, Order>, Make>(preset);
}

#ifndef CTGRAD_SMOKE_PRESETS
const bool registered = add<models::kGptTiny, kGptOrderTiny>("size=tiny") && add<models::kGptSmall, kGptOrderSmall>("size=small") &&
                        add<models::kGptMedium, kGptOrderMedium>("size=medium");
#else
const bool registered = add<models::kGptTiny, kGptOrderTiny>("size=tiny");
#endif

}  // namespace
}  // namespace ctgrad::cli
