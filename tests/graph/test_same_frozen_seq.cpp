// The run-time freeze gives the compile-time freeze's graph and plans: the encoder-decoder
// families, every preset, training, attention-map, encoder and step graphs, scan bodies included.
#include "same_frozen_graph.hpp"

#include <ctgrad/models/seq2seq.hpp>
#include <ctgrad/models/t5.hpp>
#include <ctgrad/models/transformer.hpp>

using namespace ctgrad;
using ctgrad::testing::require_same_frozen_graph;

namespace {
template <models::TransformerConfig C>
struct Transformer {
  static constexpr auto train = freeze<models::transformer, C>();
  static constexpr auto maps = freeze<models::transformer_attention_maps, C>();
  static constexpr auto encoder = freeze<models::transformer_encoder, C>();
  static constexpr auto step = freeze<models::transformer_step, C>();
  static void check(const char* name) {
    require_same_frozen_graph<train, models::transformer, C>(name);
    require_same_frozen_graph<maps, models::transformer_attention_maps, C>(name);
    require_same_frozen_graph<encoder, models::transformer_encoder, C>(name);
    require_same_frozen_graph<step, models::transformer_step, C>(name);
  }
};
template <models::Seq2SeqConfig C>
struct Seq2Seq {
  static constexpr auto train = freeze<models::seq2seq, C>();
  static constexpr auto encoder = freeze<models::seq2seq_encoder, C>();
  static constexpr auto step = freeze<models::seq2seq_step, C>();
  static void check(const char* name) {
    require_same_frozen_graph<train, models::seq2seq, C>(name);
    require_same_frozen_graph<encoder, models::seq2seq_encoder, C>(name);
    require_same_frozen_graph<step, models::seq2seq_step, C>(name);
  }
};
template <models::T5Config C>
struct T5 {
  static constexpr auto train = freeze<models::t5, C>();
  static constexpr auto encoder = freeze<models::t5_encoder, C>();
  static constexpr auto step = freeze<models::t5_step, C>();
  static void check(const char* name) {
    require_same_frozen_graph<train, models::t5, C>(name);
    require_same_frozen_graph<encoder, models::t5_encoder, C>(name);
    require_same_frozen_graph<step, models::t5_step, C>(name);
  }
};
constexpr models::TransformerConfig kTransformerVariant = [] {
  models::TransformerConfig c = models::kTransformerCopy;
  c.arch = {.norm = layers::Norm::post, .norm_kind = layers::NormKind::rms, .act = layers::Act::swiglu, .pos = layers::Pos::learned, .tie = false};
  return c;
}();
}  // namespace

TEST_CASE("run-time freeze: Transformer presets (training, attention maps, encoder, step) equal the compile-time ones", "[graph][run_time]") {
  Transformer<models::kTransformerCopy>::check("transformer copy");
  Transformer<models::kTransformerSmall>::check("transformer small");
  Transformer<models::kTransformerBase>::check("transformer base");
  Transformer<kTransformerVariant>::check("transformer: post-norm, RMSNorm, SwiGLU, learned positions, untied");
}

TEST_CASE("run-time freeze: seq2seq presets and their scan bodies equal the compile-time ones", "[graph][run_time]") {
  Seq2Seq<models::kSeq2SeqTiny>::check("seq2seq tiny");
  Seq2Seq<models::kSeq2SeqSmall>::check("seq2seq small");
}

TEST_CASE("run-time freeze: T5 presets (training, encoder, step) equal the compile-time ones", "[graph][run_time]") {
  T5<models::kT5Tiny>::check("t5 tiny");
  T5<models::kT5Small>::check("t5 small");
  T5<models::kT5SmallOriginal>::check("t5-small (the paper's)");
}
