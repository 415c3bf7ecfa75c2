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
// d2l 11.2's Nadaraya-Watson pooling, values [B, K] or [B, K, D] (layers/attention_pooling.hpp).
constexpr Builder kernel_regression(int value_dims) {
  Builder g;
  Value q = g.input("queries", {Batch, Seq});
  Value k = g.input("keys", {Batch, SeqKV});
  Value v = value_dims == 1 ? g.input("values", {Batch, SeqKV}) : g.input("values", {Batch, SeqKV, 3});
  const layers::PooledAttention a = layers::nadaraya_watson(g.scope("nw"), q, k, v, init::constant(1.0));
  g.output(a.weights, "weights");
  g.output(a.out, "predictions");
  return g;
}
constexpr auto kKernelRegression1 = freeze<kernel_regression, 1>();
constexpr auto kKernelRegression3 = freeze<kernel_regression, 3>();
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

TEST_CASE("run-time freeze: Nadaraya-Watson attention pooling equals the compile-time one", "[graph][run_time]") {
  require_same_frozen_graph<kKernelRegression1, kernel_regression, 1>("nadaraya_watson, values [B, K]");
  require_same_frozen_graph<kKernelRegression3, kernel_regression, 3>("nadaraya_watson, values [B, K, D]");
}
