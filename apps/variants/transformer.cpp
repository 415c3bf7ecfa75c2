// Compiles this unit's share of the Transformer's variants and registers them.
#include "transformer.hpp"

#include "register.hpp"

namespace ctgrad::cli {
namespace {

template <models::TransformerConfig C>
struct Make {
  static constexpr auto train = freeze<models::transformer, C>();
  static constexpr auto maps = freeze<models::transformer_attention_maps, C>();
  using Decoding = models::TransformerDecoding<C>;
  static TransformerPrograms programs() {
    return {C, make_program<train>, make_program<Decoding::encoder_graph>, make_program<Decoding::step_graph>, make_program<maps>};
  }
};

template <models::TransformerConfig P, int Order>
bool add(const char* preset) {
  return register_variants<TransformerPrograms, P, transformer_space<P, Order>, Make>(preset);
}

constexpr models::TransformerConfig with_vocab(models::TransformerConfig c, int vocab) {
  c.vocab = vocab;
  return c;
}

// The vocabulary sweep's sizes (the vocab key) with the small preset's architecture only.
#ifndef CTGRAD_SMOKE_PRESETS
const bool registered = add<models::kTransformerCopy, kTransformerOrderCopy>("task=copy") &&
                        add<models::kTransformerSmall, kTransformerOrderSmall>("size=small") &&
                        add<with_vocab(models::kTransformerSmall, 4000), 0>("size=small vocab=4000") &&
                        add<with_vocab(models::kTransformerSmall, 16000), 0>("size=small vocab=16000") &&
                        add<models::kTransformerBase, kTransformerOrderBase>("size=base");
#else
const bool registered = add<models::kTransformerCopy, kTransformerOrderCopy>("task=copy");
#endif

}  // namespace
}  // namespace ctgrad::cli
