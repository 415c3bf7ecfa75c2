// The architecture variants the `ctgrad` command trains (models/variant_space.hpp): the config keys
// norm, norm_kind, act, pos, heads, tie_embeddings of a model, and the registry of its compiled
// variants. Each model's variants are compiled by the translation units apps/variants/<model>.cpp,
// which CMake builds several times, each time with a share of the variants (CTGRAD_SHARD of
// CTGRAD_SHARDS): they compile in parallel and each in bounded memory. Each registers its
// variants' programs at start-up; a session looks its config's variant up here.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <ctgrad/graph/executor.hpp>
#include <ctgrad/models/variant_space.hpp>

#include "plugins.hpp"
#include "task.hpp"

namespace ctgrad::cli {

// A program of one compiled graph, made on demand.
using MakeProgram = std::unique_ptr<Executor<float>> (*)(const Options&);

// The variants of each model's presets, by model name: Programs is what a model makes of a
// variant (its graphs' programs and the variant's config).
template <class Programs>
class VariantRegistry {
 public:
  struct Entry {
    std::string preset;
    std::vector<std::int8_t> index;
    Programs programs;
    int plugin = 0;  // the plug-in that registered it (loading_plugin())
  };
  static VariantRegistry& get() {
    static VariantRegistry r;
    return r;
  }
  bool add(std::string preset, std::span<const std::int8_t> index, Programs p) {
    entries_.push_back({std::move(preset), {index.begin(), index.end()}, p, loading_plugin()});
    return true;
  }
  const Programs* find(const std::string& preset, std::span<const std::int8_t> index) const {
    for (const Entry& e : entries_)
      if (e.preset == preset && !plugin_rejected(e.plugin) && std::equal(e.index.begin(), e.index.end(), index.begin(), index.end()))
        return &e.programs;
    return nullptr;
  }
  std::size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;
};

// The value of an architecture key in a config, as a variant space spells it.
std::string arch_value(const Config& c, const std::string& key, int preset_heads);

// The compiled variant of a preset (its registered name) that a config asks for; a config_error when the value is
// not one of the space's, or the combination is not compiled (naming the order this build has).
template <class Programs, class C, std::size_t A>
const Programs& find_variant(const std::string& model, const std::string& preset, const Config& c, const models::VariantSpace<C, A>& space,
                             int preset_heads) {
  models::VariantIndex<A> want{};
  for (std::size_t k = 0; k < A; ++k) {
    const auto& axis = space.axes[k];
    const std::string v = arch_value(c, std::string(axis.key), preset_heads);
    int i = 0;
    while (i < axis.size() && axis.values[std::size_t(i)] != v) ++i;
    if (i == axis.size()) {
      std::string list;
      for (int j = 0; j < axis.size(); ++j) list += (j ? ", " : "") + std::string(axis.values[std::size_t(j)]);
      throw config_error(model + " " + preset + ": " + std::string(axis.key) + "=" + v + " is not one of its variants (" +
                         std::string(axis.key) + ": " + list + ")");
    }
    want[k] = std::int8_t(i);
  }
  if (const Programs* p = VariantRegistry<Programs>::get().find(preset, want)) return *p;
  const int changed = models::changed_keys(want);
  const std::string head = model + " " + preset + ": the variant " + models::describe_variant(space, want) + " changes " + std::to_string(changed) +
                           " architecture key" + (changed > 1 ? "s" : "") + " of the preset; ";
  if (const std::string hint = missing_variants_hint(model); !hint.empty())  // the cause when the variants' plug-in is not here
    throw config_error(head + "this build has each preset's own architecture only: " + hint);
  for (std::size_t k = 0; k < A; ++k)
    if (want[k] != 0 && space.axes[k].alone && changed > 1)
      throw config_error(head + std::string(space.axes[k].key) + " is a key whose variants change it alone (docs/ablations.md)");
  throw config_error(head + "this build compiles " +
                     (space.order == 0 ? "none of " + preset + "'s variants" : "the variants changing at most " + std::to_string(space.order)) +
                     " (docs/ablations.md: variants and their compile time)");
}

}  // namespace ctgrad::cli
