// ctgrad train|eval|translate transformer: the encoder-decoder Transformer on the copy task or on
// EN->DE translation (docs/models/transformer.md). The session is the translation models' own
// (translation_session.hpp); this file brings the model: its keys, presets and decoding.
#include <cstdio>
#include <memory>

#include <ctgrad/models/transformer.hpp>
#include <ctgrad/optim/schedule.hpp>

#include "../variants/transformer.hpp"
#include "translation_session.hpp"

namespace ctgrad::cli::transformer_task {
namespace {

using namespace translation;
namespace in = models::transformer_inputs;

// The preset's graph: its hyperparameters are every variant's.
constexpr auto kHyperGraph = freeze<models::transformer, models::kTransformerSmall>();

// The paper's recipe: Adam (0.9, 0.98, 1e-9), Noam schedule, label smoothing 0.1 and dropout 0.1
// (hyperparameters of the model). Warm-up 4000 for base; shorter for the small runs on 2 cores,
// with the rate halved: at factor 1 and warm-up 800 (peak 2.2e-3) the small model's attention
// collapsed onto single keys and it learned to ignore the source (docs/models/transformer.md).
// The copy task trains without dropout or smoothing.
Schema transformer_schema() {
  Schema s;
  s.choice("task", "translate", {"translate", "copy"}, "EN->DE translation, or the copy task", Role::model)
      .choice("size", "small", {"small", "base"}, "preset of the translation model (copy has its own)", Role::model);
  add_translation_keys(s);
  s.real("lr_factor", 0.5, {.min = 0, .max = 100, .min_open = true}, "the Noam schedule's factor")
      .integer("warmup", 1000, {.min = 1}, "warm-up steps of the Noam schedule");
  add_arch_keys(s, models::kTransformerSmall.arch);
  s.added_later({"data", "vocab"});
  add_common_keys(s);
  add_hyper_keys(s, kHyperGraph);
  return s;
}

// The attention probabilities of one translation: a PNG per attention kind and layer.
struct Kind {
  const char *name, *title;
  bool rows_target, cols_target;
};
constexpr Kind kKinds[] = {{"enc", "encoder self-attention", false, false}, {"dec", "decoder self-attention", true, true},
                           {"cross", "encoder-decoder attention", true, false}};

TranslationModel transformer_model(const Config& c, const Context& ctx, const TransformerPrograms& programs) {
  const auto& v = programs.config;
  TranslationModel m;
  m.name = "transformer";
  m.copy_task = c.text("task") == "copy";
  m.vocab = v.vocab, m.pad = v.pad, m.width = v.d_model;
  if (v.arch.pos == layers::Pos::learned) m.max_positions = v.max_positions;
  m.summary = (m.copy_task ? "" : "task translate, ") + std::to_string(v.n_layer) + "+" + std::to_string(v.n_layer) + " layers, d_model " +
              std::to_string(v.d_model) + ", " + std::to_string(v.heads) + " heads, d_ff " + std::to_string(v.d_ff) + " (" + describe_arch(v.arch) + ")";
  m.options = program_options(c, ctx.threads, kHyperGraph);
  m.adam = optim::AdamOptions{.beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9};
  m.lr = optim::noam(v.d_model, c.integer("warmup"), c.real("lr_factor"));
  m.train = programs.train;
  m.search = [&programs](std::span<const Parameter<float>> weights, const Options& o) -> std::unique_ptr<models::TranslationSearch> {
    const auto& v = programs.config;
    return std::make_unique<models::Seq2SeqSearch>(programs.encoder(o), programs.step(o),
                                                   models::Seq2SeqShape{v.n_layer, v.heads, v.d_model / v.heads, v.vocab, v.arch.pos != layers::Pos::none},
                                                   weights);
  };
  for (const Kind& k : kKinds)
    for (int l = 0; l < v.n_layer; ++l) m.heatmap_files.push_back(std::string(k.name) + "_layer" + std::to_string(l) + ".png");
  m.heatmaps = [&programs](std::span<const Parameter<float>> weights, const Options& o, const fs::path& dir, const std::vector<std::int32_t>& src,
                           const std::vector<std::int32_t>& tgt_in, const std::vector<std::string>& src_pieces, const std::vector<std::string>& tgt_pieces) {
    const auto maps = programs.maps(o);
    models::copy_weights(weights, *maps, "attention maps");
    const std::int32_t sl = std::int32_t(src.size()), tl = std::int32_t(tgt_in.size());
    maps->set_input(in::src, std::span<const std::int32_t>(src), {1, sl});
    maps->set_input(in::src_len, std::span<const std::int32_t>(&sl, 1), {1});
    maps->set_input(in::tgt_in, std::span<const std::int32_t>(tgt_in), {1, tl});
    maps->set_input(in::tgt_len, std::span<const std::int32_t>(&tl, 1), {1});
    maps->forward(Mode::infer);
    for (const Kind& k : kKinds)
      for (int l = 0; l < programs.config.n_layer; ++l) {
        const auto w = maps->output(std::string("weights.") + k.name + "." + std::to_string(l));  // [1, heads, rows, cols]
        draw_heatmap(dir / (std::string(k.name) + "_layer" + std::to_string(l) + ".png"), std::string(k.title) + ", layer " + std::to_string(l),
                     programs.config.heads, w.data, w.size(2), w.size(3), k.cols_target ? tgt_pieces : src_pieces, k.rows_target ? tgt_pieces : src_pieces);
      }
  };
  return m;
}

// The registered preset of a config: the copy task, a size, or the small size with another vocabulary
// (apps/variants/transformer.cpp compiles those with the preset's architecture only).
std::string transformer_preset(const Config& c) {
  if (c.text("task") == "copy") {
    if (c.text("vocab") != "8000") throw config_error("vocab=" + c.text("vocab") + ": the copy task has its own 11 symbols (vocab applies to task=translate)");
    return "task=copy";
  }
  if (c.text("vocab") == "8000") return "size=" + c.text("size");
  if (c.text("size") != "small") throw config_error("vocab=" + c.text("vocab") + " is compiled for size=small only (size=" + c.text("size") + " has 8000)");
  return "size=small vocab=" + c.text("vocab");
}

// A session of the compiled variant of preset P the config names (its architecture keys).
template <models::TransformerConfig P, int Order>
std::unique_ptr<Session> open_preset(const Config& c, const Context& ctx) {
  const auto& programs = find_variant<TransformerPrograms>("transformer", transformer_preset(c), c,
                                                           c.text("vocab") == "8000" ? transformer_space<P, Order> : transformer_space<P, 0>, P.heads);
  return std::make_unique<TranslationSession>(c, ctx, transformer_model(c, ctx, programs));
}

Task transformer_task() {
  Task t;
  t.name = "transformer";
  t.summary = "encoder-decoder Transformer: EN->DE translation (BLEU), or the copy task";
  t.schema = transformer_schema();
  t.data_parallel = true;
  t.dependent_defaults = [](Config& c) {  // copy runs default to no dropout and no label smoothing
    if (c.text("task") != "copy") return;
    for (const char* k : {"dropout", "label_smoothing"})
      if (!c.was_set(k)) c.set(k, "0", "the copy task's default");
  };
  add_translation_commands(t);
  t.open = open_presets(
      "transformer", [](const Config& c) { return c.text("task") == "copy" ? std::string("task=copy") : "size=" + c.text("size"); },
      {{"task=copy", &open_preset<models::kTransformerCopy, kTransformerOrderCopy>} CTGRAD_UNLESS_SMOKE(
          , {"size=small", &open_preset<models::kTransformerSmall, kTransformerOrderSmall>},
          {"size=base", &open_preset<models::kTransformerBase, kTransformerOrderBase>})});
  return t;
}

const bool registered = register_task(transformer_task());

}  // namespace
}  // namespace ctgrad::cli::transformer_task
