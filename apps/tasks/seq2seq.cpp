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

// A compiled model: its training graph, its decoding graphs.
struct Seq2SeqPrograms {
  models::Seq2SeqConfig config;
  std::unique_ptr<Executor<float>> (*train)(const Options&), (*encoder)(const Options&), (*step)(const Options&);
};
template <models::Seq2SeqConfig C>
struct Compiled {
  static constexpr auto train_graph = freeze<models::seq2seq, C>();
  static constexpr auto encoder_graph = freeze<models::seq2seq_encoder, C>();
  static constexpr auto step_graph = freeze<models::seq2seq_step, C>();
  template <const auto& G>
  static std::unique_ptr<Executor<float>> make(const Options& o) { return std::make_unique<Program<G>>(o); }
  static constexpr Seq2SeqPrograms programs{C, &make<train_graph>, &make<encoder_graph>, &make<step_graph>};
};
constexpr models::Seq2SeqConfig with_vocab(models::Seq2SeqConfig c, int vocab) {
  c.vocab = vocab;
  return c;
}
constexpr models::Seq2SeqConfig kTiny{.vocab = 8000, .embed = 32, .hidden = 32, .layers = 2};
constexpr models::Seq2SeqConfig kSmall = with_vocab(models::kSeq2SeqSmall, 8000);

// size x vocab -> the compiled model.
const Seq2SeqPrograms& programs_of(const Config& c) {
  struct Entry {
    const char *size, *vocab;
    const Seq2SeqPrograms& p;
  };
  static const Entry entries[] = {{"tiny", "8000", Compiled<kTiny>::programs} CTGRAD_UNLESS_SMOKE(
      , {"small", "8000", Compiled<kSmall>::programs}, {"small", "16000", Compiled<with_vocab(kSmall, 16000)>::programs})};
  for (const Entry& e : entries)
    if (c.text("size") == e.size && c.text("vocab") == e.vocab) return e.p;
  throw config_error("size=" + c.text("size") + " vocab=" + c.text("vocab") + " is not compiled (size=tiny: vocab 8000; size=small: 8000 or 16000)");
}

Schema seq2seq_schema() {
  Schema s;
  s.choice("size", "small", {"tiny", "small"}, "tiny: 32-wide, for tests; small: d2l's (embedding 256, GRUs of 256, 2 layers)", Role::model);
  add_translation_keys(s);
  s.real("lr", 2e-3, {.min = 0, .max = 10, .min_open = true}, "Adam's peak learning rate (then a cosine decay to a tenth of it at the last step)")
      .integer("warmup", 200, {.min = 0}, "steps of linear warm-up")
      .real("clip", 1.0, {.min = 0}, "bound of the global gradient norm (d2l's 1; 0: none)");
  add_common_keys(s);
  add_hyper_keys(s, Compiled<kTiny>::train_graph);
  return s;
}

TranslationModel seq2seq_model(const Config& c, const Context& ctx, const Seq2SeqPrograms& p) {
  const auto& v = p.config;
  TranslationModel m;
  m.name = "seq2seq";
  m.vocab = v.vocab, m.pad = v.pad, m.width = v.hidden;
  m.summary = "GRU encoder-decoder with additive attention (Bahdanau), " + std::to_string(v.layers) + "+" + std::to_string(v.layers) +
              " layers, embedding " + std::to_string(v.embed) + ", hidden " + std::to_string(v.hidden);
  m.options = program_options(c, ctx.threads, Compiled<kTiny>::train_graph);
  m.lr = optim::warmup_cosine(c.real("lr"), c.real("lr") / 10, c.integer("warmup"), c.integer("steps"));
  m.clip = c.real("clip");
  m.train = p.train;
  m.search = [&p](std::span<const Parameter<float>> weights, const Options& o) -> std::unique_ptr<models::TranslationSearch> {
    return std::make_unique<models::RecurrentSearch>(p.encoder(o), p.step(o), models::RecurrentShape{p.config.layers, p.config.hidden, p.config.vocab}, weights);
  };
  m.heatmap_files = {"attention.png"};
  m.heatmaps = [&p](std::span<const Parameter<float>> weights, const Options& o, const fs::path& dir, const std::vector<std::int32_t>& src,
                    const std::vector<std::int32_t>& tgt_in, const std::vector<std::string>& src_pieces, const std::vector<std::string>& tgt_pieces) {
    // The training graph under teacher forcing on the translation: its "attention" output [1, T, S].
    const auto model = p.train(o);
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
