// Compiles this unit's share of the Llama's variants and registers them (apps/variants/register.hpp).
#include "llama.hpp"

#include "register.hpp"

namespace ctgrad::cli {
namespace {

template <models::LlamaConfig C>
struct Make {
  static constexpr auto train = freeze<models::llama<C>>();
  static constexpr auto decoder = freeze<models::llama_decoder<C>>();
  static LlamaPrograms programs() { return {C, make_program<train>, make_program<decoder>}; }
};

template <models::LlamaConfig P, int Order>
bool add(const char* preset) {
  return register_variants<LlamaPrograms, P, llama_space<P, Order>, Make>(preset);
}

#ifndef CTGRAD_SMOKE_PRESETS
const bool registered = add<models::kLlamaTiny, kLlamaOrderTiny>("size=tiny") && add<models::kLlamaSmall, kLlamaOrderSmall>("size=small") &&
                        add<models::kLlamaMedium, kLlamaOrderMedium>("size=medium");
#else
const bool registered = add<models::kLlamaTiny, kLlamaOrderTiny>("size=tiny");
#endif

}  // namespace
}  // namespace ctgrad::cli
