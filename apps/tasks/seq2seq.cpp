// ctgrad train|eval|translate seq2seq: Bahdanau's attention on an RNN encoder-decoder (d2l 11.4,
// models/seq2seq.hpp) on the Transformer's EN->DE data, scored by the same BLEU
// (docs/models/seq2seq.md). The session is the translation models' (translation_session.hpp).
#include <memory>
#include <string>

#include <ctgrad/models/recurrent_translator.hpp>
#include <ctgrad/models/seq2seq.hpp>
#include <ctgrad/optim/schedule.hpp>

#include "translation_session.hpp"

namespace ctgrad::cli::seq2seq_task {
namespace {

using namespace translation;
namespace in = models::seq2seq_inputs;

// The tiny preset's graph, frozen at run time: its hyperparameters are every size's.
const RuntimeGraph kHyperGraph = freeze(models::seq2seq(models::Seq2SeqConfig{.vocab = 8000, .embed = 32, .hidden = 32, .layers = 2}));

// The model's graphs, built from its config at run time.
struct Seq2SeqPrograms {
  models::Seq2SeqConfig config;
  ProgramMaker train, encoder, step;
};
constexpr models::Seq2SeqConfig kTiny{.vocab = 8000, .embed = 32, .hidden = 32, .layers = 2};

// The config's model: a preset, its sizes overridden by the keys given.
std::shared_ptr<const Seq2SeqPrograms> programs_of(const Config& c) {
  const models::Seq2SeqConfig& p = c.text("size") == "tiny" ? kTiny : models::kSeq2SeqSmall;
  models::Seq2SeqConfig m = p;
  m.vocab = int(c.integer("vocab")), m.embed = size_or(c, "embed", p.embed), m.hidden = size_or(c, "hidden", p.hidden);
  m.layers = size_or(c, "layers", p.layers);
  return std::make_shared<const Seq2SeqPrograms>(Seq2SeqPrograms{m, program_maker(plan_model([m] { return models::seq2seq(m); })),
                                                                 program_maker([m] { return models::seq2seq_encoder(m); }),
                                                                 program_maker([m] { return models::seq2seq_step(m); })});
}

Schema seq2seq_schema() {
  Schema s;
  s.choice("size", "small", {"tiny", "small"}, "preset, a bundle of sizes any size key overrides: tiny: 32-wide, for tests; small: d2l's (embedding 256, GRUs of 256, 2 layers)", Role::model);
  add_translation_keys(s);
  s.integer("embed", 0, {.min = 0, .max = 1 << 16}, "architecture: the token embedding's width (0: the preset's: tiny 32, small 256)", Role::model)
      .integer("hidden", 0, {.min = 0, .max = 1 << 16}, "architecture: the GRUs' and the attention's width (0: the preset's: tiny 32, small 256)", Role::model)
      .integer("layers", 0, {.min = 0, .max = models::kSeq2SeqMaxLayers}, "architecture: GRU layers of the encoder and of the decoder (0: the preset's: 2)",
               Role::model);
  s.stated_when_set({"embed", "hidden", "layers"});
  s.real("lr", 2e-3, {.min = 0, .max = 10, .min_open = true}, "Adam's peak learning rate (then a cosine decay to a tenth of it at the last step)")
      .integer("warmup", 200, {.min = 0}, "steps of linear warm-up")
      .real("clip", 1.0, {.min = 0}, "bound of the global gradient norm (d2l's 1; 0: none)");
  add_common_keys(s);
  add_hyper_keys(s, kHyperGraph);
  return s;
}

TranslationModel seq2seq_model(const Config& c, const Context& ctx, std::shared_ptr<const Seq2SeqPrograms> shared) {
  const Seq2SeqPrograms& p = *shared;
  const auto& v = p.config;
  TranslationModel m;
  m.name = "seq2seq";
  m.vocab = v.vocab, m.pad = v.pad, m.width = v.hidden;
  m.summary = "GRU encoder-decoder with additive attention (Bahdanau), " + std::to_string(v.layers) + "+" + std::to_string(v.layers) +
              " layers, embedding " + std::to_string(v.embed) + ", hidden " + std::to_string(v.hidden);
  m.options = program_options(c, ctx.threads, kHyperGraph);
  m.lr = optim::warmup_cosine(c.real("lr"), c.real("lr") / 10, c.integer("warmup"), c.integer("steps"));
  m.clip = c.real("clip");
  m.train = p.train;
  m.search = [shared](std::span<const Parameter<float>> weights, const Options& o) -> std::unique_ptr<models::TranslationSearch> {
    const Seq2SeqPrograms& p = *shared;
    return std::make_unique<models::RecurrentSearch>(p.encoder(o), p.step(o), models::RecurrentShape{p.config.layers, p.config.hidden, p.config.vocab}, weights);
  };
  m.heatmap_files = {"attention.png"};
  m.heatmaps = [shared](std::span<const Parameter<float>> weights, const Options& o, const fs::path& dir, const std::vector<std::int32_t>& src,
                    const std::vector<std::int32_t>& tgt_in, const std::vector<std::string>& src_pieces, const std::vector<std::string>& tgt_pieces) {
    // The training graph under teacher forcing on the translation: its "attention" output [1, T, S].
    const auto model = shared->train(o);
    models::copy_weights(weights, *model, "attention maps");
    const std::int32_t sl = std::int32_t(src.size()), tl = std::int32_t(tgt_in.size());
    std::vector<std::int32_t> tgt_out(tgt_in.begin() + 1, tgt_in.end());
    tgt_out.push_back(kEos);
    model->set_input(in::src, std::span<const std::int32_t>(src), {1, sl});
    model->set_input(in::src_len, std::span<const std::int32_t>(&sl, 1), {1});
    model->set_input(in::tgt_in, std::span<const std::int32_t>(tgt_in), {1, tl});
    model->set_input(in::tgt_len, std::span<const std::int32_t>(&tl, 1), {1});
    model->set_input(in::tgt_out, std::span<const std::int32_t>(tgt_out), {1, tl});
    model->forward(Mode::infer);
    const auto w = model->output("attention");
    draw_heatmap(dir / "attention.png", "Bahdanau attention: decoder steps (rows) over the source (columns)", 1, w.data, w.size(1), w.size(2),
                 src_pieces, tgt_pieces);
  };
  return m;
}

std::unique_ptr<Session> open_seq2seq(const Config& c, const Context& ctx) {
  return std::make_unique<TranslationSession>(c, ctx, seq2seq_model(c, ctx, programs_of(c)));
}

Task seq2seq_task() {
  Task t;
  t.name = "seq2seq";
  t.summary = "RNN encoder-decoder with Bahdanau's attention (d2l 11.4): EN->DE translation (BLEU), attention heatmaps";
  t.schema = seq2seq_schema();
  t.data_parallel = true;
  add_translation_commands(t);
  t.open = &open_seq2seq;
  return t;
}

const bool registered = register_task(seq2seq_task());

}  // namespace
}  // namespace ctgrad::cli::seq2seq_task
