// For the translation units apps/variants/<model>.cpp: registers the variants of a preset that
// fall in this unit's share (CTGRAD_SHARD of CTGRAD_SHARDS, defined by the unit CMake writes).
#pragma once
#include <utility>

#include "../variant_registry.hpp"

#ifndef CTGRAD_SHARD
#define CTGRAD_SHARD 0
#define CTGRAD_SHARDS 1
#endif
// Which variants this unit holds: 0 all of its share, 1 each preset's own architecture only (the
// command's built-in GPT), 2 all of its share but that one (the GPT's variants plug-in).
#ifndef CTGRAD_VARIANT_PART
#define CTGRAD_VARIANT_PART 0
#endif

namespace ctgrad::cli {

// Make<C>::programs() is what the model makes of the variant with config C.
template <class Programs, auto Preset, const auto& Space, template <auto> class Make>
bool register_variants(const char* preset) {
  static constexpr auto table = models::variant_table<Space>();
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          constexpr bool own = models::changed_keys(table[I]) == 0;
          if constexpr (I % CTGRAD_SHARDS == CTGRAD_SHARD && (CTGRAD_VARIANT_PART == 0 || (CTGRAD_VARIANT_PART == 1) == own)) {
            static constexpr auto config = models::variant_config(Preset, Space, table[I]);
            VariantRegistry<Programs>::get().add(preset, table[I], Make<config>::programs());
          }
        }(),
        ...);
  }(std::make_index_sequence<table.size()>());
  return true;
}

template <const auto& G>
std::unique_ptr<Executor<float>> make_program(const Options& o) {
  return std::make_unique<Program<G>>(o);
}

}  // namespace ctgrad::cli
