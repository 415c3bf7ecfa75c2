// The run-time freeze gives the compile-time freeze's graph and plans: the encoders, every preset.
#include "same_frozen_graph.hpp"

#include <ctgrad/models/bert.hpp>
#include <ctgrad/models/vit.hpp>

using namespace ctgrad;
using ctgrad::testing::require_same_frozen_graph;

namespace {
template <models::VitConfig C>
struct Vit {
  static constexpr auto train = freeze<models::vit, C>();
  static void check(const char* name) { require_same_frozen_graph<train, models::vit, C>(name); }
};
template <models::BertConfig C>
struct Bert {
  static constexpr auto mlm = freeze<models::bert_mlm, C>();
  static constexpr auto classifier = freeze<models::bert_classifier, C, 3>();
  static void check(const char* name) {
    require_same_frozen_graph<mlm, models::bert_mlm, C>(name);
    require_same_frozen_graph<classifier, models::bert_classifier, C, 3>(name);
  }
};
constexpr models::VitConfig kVitMeanPool = [] {
  models::VitConfig c = models::kVitTiny;
  c.mean_pool = true;
  return c;
}();
}  // namespace

TEST_CASE("run-time freeze: ViT presets equal the compile-time ones", "[graph][run_time]") {
  Vit<models::kVitTiny>::check("vit tiny");
  Vit<models::kVitFast>::check("vit fast");
  Vit<models::kVitSmall>::check("vit small");
  Vit<kVitMeanPool>::check("vit tiny, mean pooling");
}

TEST_CASE("run-time freeze: BERT presets (masked LM and classifier) equal the compile-time ones", "[graph][run_time]") {
  Bert<models::kBertTiny>::check("bert tiny");
  Bert<models::kBertSmall>::check("bert small");
  Bert<models::kBertBase>::check("bert base");
}
