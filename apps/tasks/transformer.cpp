// ctgrad train|eval|translate transformer: the encoder-decoder Transformer on the copy task or on
// EN->DE translation (docs/models/transformer.md). The session is the translation models' own
// (translation_session.hpp); this file brings the model: its keys, presets and decoding.
#include <cstdio>
#include <memory>

#include <ctgrad/models/transformer.hpp>
#include <ctgrad/optim/schedule.hpp>

#include "translation_session.hpp"

namespace ctgrad::cli::transformer_task {
namespace {

using namespace translation;
namespace in = models::transformer_inputs;

// The preset's graph, frozen at run time: its hyperparameters are every size's.
const RuntimeGraph kHyperGraph = freeze(models::transformer(models::kTransformerSmall));

// The paper's recipe: Adam (0.9, 0.98, 1e-9), Noam schedule, label smoothing 0.1 and dropout 0.1
// (hyperparameters of the model). Warm-up 4000 for base; shorter for the small runs on 2 cores,
// with the rate halved: at factor 1 and warm-up 800 (peak 2.2e-3) the small model's attention
// collapsed onto single keys and it learned to ignore the source (docs/models/transformer.md).
// The copy task trains without dropout or smoothing.
Schema transformer_schema() {
  Schema s;
  s.choice("task", "translate", {"translate", "copy"}, "EN->DE translation, or the copy task", Role::model)
      .choice("size", "small", {"small", "base"}, "preset of the translation model, a bundle of sizes any size key overrides (copy has its own)",
              Role::model);
  add_translation_keys(s);
  std::vector<PresetSizes> sizes;
  for (const auto& [n, p] : {std::pair{"small", models::kTransformerSmall}, {"base", models::kTransformerBase}, {"copy", models::kTransformerCopy}})
    sizes.push_back({n, p.d_model, p.n_layer, p.d_ff / p.d_model, 0, p.max_positions});
  add_size_keys(s, sizes);
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

// The model's graphs, built from its config at run time.
struct TransformerPrograms {
  models::TransformerConfig config;
  ProgramMaker train, encoder, step, maps;
};

const models::TransformerConfig& transformer_preset(const Config& c) {
  if (c.text("task") == "copy") return models::kTransformerCopy;
  return c.text("size") == "base" ? models::kTransformerBase : models::kTransformerSmall;
}

// The config's model: a preset, its sizes and architecture overridden by the keys given.
models::TransformerConfig transformer_config(const Config& c) {
  const models::TransformerConfig& p = transformer_preset(c);
  models::TransformerConfig m = p;
  if (c.text("task") == "copy") {
    if (c.integer("vocab") != 8000) throw config_error("vocab=" + c.show("vocab") + ": the copy task has its own 11 symbols (vocab applies to task=translate)");
  } else {
    m.vocab = int(c.integer("vocab"));
  }
  m.d_model = size_or(c, "d_model", p.d_model), m.n_layer = size_or(c, "layers", p.n_layer), m.heads = size_or(c, "heads", p.heads);
  m.arch = arch_of(c, true);
  m.d_ff = ff_width(c, m.d_model, p.d_ff / p.d_model, false);  // the block gates it for swiglu
  m.max_positions = size_or(c, "max_context", p.max_positions);
  check_heads(m.d_model, m.heads, m.heads, false);
  return m;
}

TransformerPrograms transformer_programs(const Config& c) {
  const models::TransformerConfig m = transformer_config(c);
  return {m, program_maker(plan_model([m] { return models::transformer(m); })), program_maker([m] { return models::transformer_encoder(m); }),
          program_maker([m] { return models::transformer_step(m); }), program_maker([m] { return models::transformer_attention_maps(m); })};
}

TranslationModel transformer_model(const Config& c, const Context& ctx, std::shared_ptr<const TransformerPrograms> shared) {
  const TransformerPrograms& programs = *shared;
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
  m.search = [shared](std::span<const Parameter<float>> weights, const Options& o) -> std::unique_ptr<models::TranslationSearch> {
    const auto& v = shared->config;
    return std::make_unique<models::Seq2SeqSearch>(shared->encoder(o), shared->step(o),
                                                   models::Seq2SeqShape{v.n_layer, v.heads, v.d_model / v.heads, v.vocab, v.arch.pos != layers::Pos::none},
                                                   weights);
  };
  for (const Kind& k : kKinds)
    for (int l = 0; l < v.n_layer; ++l) m.heatmap_files.push_back(std::string(k.name) + "_layer" + std::to_string(l) + ".png");
  m.heatmaps = [shared](std::span<const Parameter<float>> weights, const Options& o, const fs::path& dir, const std::vector<std::int32_t>& src,
                           const std::vector<std::int32_t>& tgt_in, const std::vector<std::string>& src_pieces, const std::vector<std::string>& tgt_pieces) {
    const TransformerPrograms& programs = *shared;
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

std::unique_ptr<Session> open_transformer(const Config& c, const Context& ctx) {
  auto programs = std::make_shared<const TransformerPrograms>(transformer_programs(c));
  return std::make_unique<TranslationSession>(c, ctx, transformer_model(c, ctx, std::move(programs)));
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
  t.open = &open_transformer;
  return t;
}

const bool registered = register_task(transformer_task());

}  // namespace
}  // namespace ctgrad::cli::transformer_task
