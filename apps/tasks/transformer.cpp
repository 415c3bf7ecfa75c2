// ctgrad train|eval|translate transformer: the encoder-decoder Transformer on the copy task or on
// EN->DE translation of the Ding dictionary's sentence pairs (docs/models/transformer.md).
#include <algorithm>
#include <cstdio>
#include <memory>

#include <ctgrad/optim/schedule.hpp>

#include "transformer_session.hpp"

namespace ctgrad::cli::transformer_task {
namespace {


// The paper's recipe: Adam (0.9, 0.98, 1e-9), Noam schedule, label smoothing 0.1 and dropout 0.1
// (hyperparameters of the model). Warm-up 4000 for base; shorter for the small runs on 2 cores,
// with the rate halved: at factor 1 and warm-up 800 (peak 2.2e-3) the small model's attention
// collapsed onto single keys and it learned to ignore the source (docs/models/transformer.md).
// The copy task trains without dropout or smoothing.
Schema transformer_schema() {
  Schema s;
  s.choice("task", "translate", {"translate", "copy"}, "EN->DE translation, or the copy task", Role::model)
      .choice("size", "small", {"small", "base"}, "preset of the translation model (copy has its own)", Role::model)
      .choice("data", "sentences", {"sentences", "ding", "ding+wesnoth", "debian", "debian+ding+wesnoth"},
              "sentences: the Ding dictionary's sentence pairs (split by sentence); ding: all its pairs, phrases too, split by entry; "
              "ding+wesnoth: and the Battle for Wesnoth's dialogue (scripts/setup_wesnoth.sh); debian: the corpus of ctgrad data ende "
              "(labels as phrases), the Ding and Wesnoth test splits scored apart; debian+ding+wesnoth: both train",
              Role::model)
      .choice("vocab", "8000", {"4000", "8000", "16000"},
              "pieces of the shared BPE vocabulary (size=small; compiled variants: 4000 and 16000 with the preset architecture)", Role::model)
      .real("train_fraction", 1.0, {.min = 0, .max = 1, .min_open = true},
            "train on this fraction of the training sentences and of the phrases (a fixed random subset; its vocabulary too): the data-size curve",
            Role::run)
      .real("phrase_weight", 1.0, {.min = 0, .max = 100}, "data=ding: dictionary phrases per sentence pair in each epoch (0: none)", Role::run)
      .integer("batch", 64, {.min = 1, .max = 1 << 16}, "sentence pairs per step", Role::run)
      .integer("batch_tokens", 0, {.min = 0, .max = 1 << 24},
               "tokens per step instead (the paper's batching: pairs of similar length, padded rows x longest side at most this; 0: batch pairs)",
               Role::run)
      .integer("max_len", 64, {.min = 4, .max = 1 << 12}, "tokens per sentence at most (longer training pairs are dropped)", Role::run)
      .integer("steps", 3000, {.min = 1, .max = std::int64_t(1) << 40}, "training steps")
      .real("lr_factor", 0.5, {.min = 0, .max = 100, .min_open = true}, "the Noam schedule's factor")
      .integer("warmup", 1000, {.min = 1}, "warm-up steps of the Noam schedule")
      .integer("eval_every", 500, {.min = 1}, "steps between validations and checkpoints")
      .integer("keep_checkpoints", 0, {.min = 0, .max = 1000}, "keep the last k checkpoints for averaging (ctgrad average-checkpoints)")
      .integer("beam", 4, {.min = 1, .max = 1000}, "beam width of eval")
      .real("alpha", 0.6, {.min = 0, .max = 10}, "length penalty of the beam search")
      .integer("eval_sentences", 0, {.min = 0}, "test sentences for BLEU (0: all)")
      .integer("val_bleu", 0, {.min = 0}, "validation sentences translated greedily at each validation for its BLEU (0: none)");
  add_arch_keys(s, models::kTransformerSmall.arch);
  s.added_later({"data", "vocab"});
  add_common_keys(s);
  add_hyper_keys(s, kHyperGraph);
  return s;
}

Schema eval_options() {
  Schema s;
  s.text("attention-png", "", "folder for attention heatmaps (gnuplot) of one sentence")
      .text("sentence", "", "the sentence of the heatmaps (default: the first test sentence)")
      .integer("examples", 8, {.min = 0, .max = 1000}, "translations shown of each test set, chosen by a fixed shuffle (not the first ones)");
  return s;
}

Schema translate_options() {
  Schema s;
  s.text("text", "", "the English sentence (without it: a sentence per line of --input or standard input)")
      .text("input", "", "a file of English sentences, one per line (without it: standard input)")
      .integer("beam", 4, {.min = 1, .max = 1000}, "1: greedy")
      .real("alpha", 0.6, {.min = 0, .max = 10}, "length penalty")
      .integer("batch", 32, {.min = 1, .max = 4096}, "sentences decoded at once from standard input");
  return s;
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
  return std::make_unique<TransformerSession>(c, ctx, programs);
}

}  // namespace

TransformerSession::TransformerSession(const Config& c, const Context& ctx, const TransformerPrograms& programs)
    : c_(c), ctx_(ctx), copy_(c.text("task") == "copy"), programs_(programs),
      model_(programs_.train(options(c, ctx))), opt_(model_->parameters(), optim::AdamOptions{.beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9}),
      vocab_(programs_.config.vocab), batch_(c.integer("batch")),
      max_len_(c.integer("max_len")), seed_(data_seed(c)) {
  const std::int64_t len = copy_ ? 10 : max_len_;
  if (programs_.config.arch.pos == layers::Pos::learned && len > programs_.config.max_positions)
    throw config_error("pos=learned has a table of " + std::to_string(programs_.config.max_positions) + " positions: max_len " +
                       c.show("max_len") + " is longer");
  // Token batches hold up to batch_tokens tokens: as many rows of max_len as that is, at most.
  const std::int64_t rows = c.integer("batch_tokens") > 0 ? std::max<std::int64_t>(1, (c.integer("batch_tokens") + len - 1) / len) : batch_;
  check_fits(*model_, {rows, len, len, 1, 1, 1}, 40.0 * double(rows) * double(len),
             c.integer("batch_tokens") > 0 ? "batch_tokens " + c.show("batch_tokens") + " (max_len " + c.show("max_len") + ")"
                                           : "batch " + c.show("batch") + " x max_len " + c.show("max_len"));
}

void TransformerSession::prepare() {
  if (copy_) {
    for (std::uint64_t n = 0; n < 256; ++n) val_.push_back(copy_example(seed_ + 1000, n));  // never trained on
  } else {
    load_translation_data();
  }
  if (ctx_.command != "train") return;
  const auto& v = programs_.config;
  std::printf("ctgrad train transformer: task %s, %d+%d layers, d_model %d, %d heads, d_ff %d (%s), %lld parameters, %d threads\n",
              c_.text("task").c_str(), v.n_layer, v.n_layer, v.d_model, v.heads, v.d_ff, describe_arch(v.arch).c_str(),
              (long long)model_->parameter_count(), model_->threads());
  if (!copy_) {
    std::string others;
    for (const auto& [name, set] : other_tests_) others += " + " + std::to_string(set.size()) + " " + name;
    std::printf("EN->DE (data=%s): %lld sentence pairs and %lld %s train (%.1f phrases per pair an epoch) / %zu validation / "
                "%zu test sentence pairs%s, shared BPE vocabulary of %d\n",
                c_.text("data").c_str(), (long long)sentences_, (long long)(std::int64_t(train_.size()) - sentences_),
                c_.text("data").rfind("debian", 0) == 0 ? "phrases and labels" : "dictionary phrases", c_.real("phrase_weight"),
                val_.size(), test_.size(), others.empty() ? "" : (" (" + others.substr(3) + ")").c_str(), vocab_);
    if (dropped_ > 0) std::printf("%zu pairs dropped: a side of theirs is a held-out pair's (or, of a game test pair, trains)\n", dropped_);
    if (c_.integer("batch_tokens") > 0) std::printf("batches of up to %lld tokens (rows x longest side)\n", (long long)c_.integer("batch_tokens"));
  }
}

checkpoint::Metadata TransformerSession::metadata() {
  if (copy_) return {};
  return {{"tokenizer", "tokenizer.model"}, {"tokenizer_hash", file_hash(ctx_.folder.file("tokenizer.model"))}};
}

std::vector<std::string> TransformerSession::metrics() const {
  if (!copy_ && c_.integer("val_bleu") > 0) return {"loss", "bleu"};
  return {"loss"};
}

training::LoopOptions TransformerSession::loop() {
  return {.steps = c_.integer("steps"),
          .eval_every = c_.integer("eval_every"),
          .lr = optim::noam(programs_.config.d_model, c_.integer("warmup"), c_.real("lr_factor")),
          .unit = "nats/token (NLL)",
          .items = "tok",
          .keep_checkpoints = int(c_.integer("keep_checkpoints"))};
}

training::Run TransformerSession::run() {
  return {.model = *model_, .optimizer = opt_, .feed = [this](std::int64_t step) {
            // This rank's pairs of the step's batch (all of them in one process), padded to
            // their own longest: the loss terms (target tokens) weight the ranks' gradients.
            Batch bt;
            if (copy_) {
              copy_batch_.clear();
              std::vector<std::int64_t> idx;
              for (std::int64_t b = 0; b < batch_; ++b)
                copy_batch_.push_back(copy_example(seed_, std::uint64_t(step * batch_ + b))), idx.push_back(b);
              bt = make_batch(copy_batch_, shard_of(idx), kPad);
            } else {
              bt = make_batch(train_, shard_of(training_batch(step)), kPad);
            }
            feed(*model_, bt);
            shard_tokens_ = bt.tokens();
            return double(bt.tokens());
          },
          .validate = [this] {
            training::Metrics m{{{"loss", validation_nll()}}};
            if (!copy_ && c_.integer("val_bleu") > 0) m.values.emplace_back("bleu", validation_bleu(std::size_t(c_.integer("val_bleu"))));
            return m;
          },
          .loss_terms = [this] { return double(shard_tokens_); }};
}

int TransformerSession::after_training(const training::Outcome&) {
  auto tr = translator();
  for (std::size_t i = 0; i < std::min<std::size_t>(val_.size(), 3) && !training::interrupted(); ++i) {
    const auto out = tr.greedy(val_[i].src, copy_ ? 1 : kBos, copy_ ? -1 : kEos, copy_ ? 9 : int(max_len_));
    if (copy_) {
      std::string s, o;
      for (auto t : val_[i].src) s += std::to_string(t) + " ";
      for (auto t : out) o += std::to_string(t) + " ";
      std::printf("  %s-> 1 %s\n", s.c_str(), o.c_str());
    } else {
      std::printf("  %s\n  -> %s\n", val_[i].src_text.c_str(), tok_->decode(out).c_str());
    }
  }
  return training::interrupted() ? 130 : 0;
}

namespace {

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
  t.commands.push_back({"eval", "validation NLL, BLEU of greedy and beam search on the test split, heatmaps", eval_options()});
  t.commands.push_back({"translate", "translate English lines (--text, --input FILE or standard input) with beam search, placeholders and markup kept", translate_options()});
  Schema exp;
  exp.integer("steps", 3000, {.min = 1, .max = 1 << 22}, "training steps to export").text("out", "transformer_batches.safetensors", "the file to write").flag("overwrite", false, "replace an existing --out file");
  t.commands.push_back({"export-batches", "the run's training batches (steps 1..N), validation batches and test sources, for another framework", exp});
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
