// The translation session's keys, commands and training (translation_session.hpp), shared by the
// encoder-decoder models.
#include <algorithm>
#include <cstdio>
#include <memory>

#include <ctgrad/training/escape.hpp>

#include "translation_session.hpp"

namespace ctgrad::cli::translation {

void add_translation_keys(Schema& s) {
  s.text("data", "sentences",
         "sentences: the Ding dictionary's sentence pairs (split by sentence); ding: all its pairs, phrases too, split by entry; "
         "ding+wesnoth: and the Battle for Wesnoth's dialogue (scripts/setup_wesnoth.sh); debian: the corpus of ctgrad data ende "
         "(labels as phrases), the Ding and Wesnoth test splits scored apart; debian+ding+wesnoth: both train; or your pairs: a TSV file "
         "(source, tab, target), a JSON Lines file (source_field, target_field), a glob of them, or pairs:SOURCE.txt,TARGET.txt "
         "(line-aligned), 5% each held out for validation and test by a hash of the source side",
         Role::model)
      .text("source_field", "en", "JSON Lines pairs: the field of the source side (also inside a \"translation\" object)", Role::model)
      .text("target_field", "de", "JSON Lines pairs: the field of the target side", Role::model);
  s.stated_when_set({"source_field", "target_field"});  // a run on ctgrad's corpora saves what it saved before
  s.integer("vocab", 8000, {.min = 256, .max = 1 << 17}, "architecture: pieces of the shared BPE vocabulary, the model's vocabulary", Role::model)
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
      .integer("eval_every", 500, {.min = 1}, "steps between validations and checkpoints")
      .integer("keep_checkpoints", 0, {.min = 0, .max = 1000}, "keep the last k checkpoints for averaging (ctgrad average-checkpoints)")
      .integer("beam", 4, {.min = 1, .max = 1000}, "beam width of eval")
      .real("alpha", 0.6, {.min = 0, .max = 10}, "length penalty of the beam search")
      .integer("eval_sentences", 0, {.min = 0}, "test sentences for BLEU (0: all)")
      .integer("val_bleu", 0, {.min = 0}, "validation sentences translated greedily at each validation for its BLEU (0: none)");
}

void add_translation_commands(Task& t) {
  Schema eval;
  eval.text("attention-png", "", "folder for attention heatmaps (gnuplot) of one sentence")
      .text("sentence", "", "the sentence of the heatmaps (default: the first test sentence)")
      .integer("examples", 8, {.min = 0, .max = 1000}, "translations shown of each test set, chosen by a fixed shuffle (not the first ones)");
  Schema translate;
  translate.text("text", "", "the English sentence (without it: a sentence per line of --input or standard input)")
      .text("input", "", "a file of English sentences, one per line (without it: standard input)")
      .integer("beam", 4, {.min = 1, .max = 1000}, "1: greedy")
      .real("alpha", 0.6, {.min = 0, .max = 10}, "length penalty")
      .integer("batch", 32, {.min = 1, .max = 4096}, "sentences decoded at once from standard input");
  Schema exp;
  exp.integer("steps", 3000, {.min = 1, .max = 1 << 22}, "training steps to export")
      .text("out", t.name + "_batches.safetensors", "the file to write")
      .flag("overwrite", false, "replace an existing --out file");
  t.commands.push_back({"eval", "validation NLL, BLEU of greedy and beam search on the test split, heatmaps", eval});
  t.commands.push_back({"translate", "translate English lines (--text, --input FILE or standard input) with beam search, placeholders and markup kept", translate});
  t.commands.push_back({"export-batches", "the run's training batches (steps 1..N), validation batches and test sources, for another framework", exp});
}

TranslationSession::TranslationSession(const Config& c, const Context& ctx, TranslationModel model)
    : c_(c), ctx_(ctx), copy_(model.copy_task), m_(std::move(model)), model_(m_.train(m_.options)),
      opt_(model_->parameters(), m_.adam), vocab_(m_.vocab), batch_(c.integer("batch")), max_len_(c.integer("max_len")), seed_(data_seed(c)) {
  const std::int64_t len = copy_ ? 10 : max_len_;
  if (m_.max_positions > 0 && len > m_.max_positions)
    throw config_error("pos=learned has a table of " + std::to_string(m_.max_positions) + " positions (max_context): max_len " + c.show("max_len") + " is longer");
  // Token batches hold up to batch_tokens tokens: as many rows of max_len as that is, at most.
  const std::int64_t rows = c.integer("batch_tokens") > 0 ? std::max<std::int64_t>(1, (c.integer("batch_tokens") + len - 1) / len) : batch_;
  check_fits(*model_, {rows, len, len, 1, 1, 1}, 40.0 * double(rows) * double(len),
             c.integer("batch_tokens") > 0 ? "batch_tokens " + c.show("batch_tokens") + " (max_len " + c.show("max_len") + ")"
                                           : "batch " + c.show("batch") + " x max_len " + c.show("max_len"));
}

void TranslationSession::prepare() {
  if (copy_) {
    for (std::uint64_t n = 0; n < 256; ++n) val_.push_back(copy_example(seed_ + 1000, n));  // never trained on
  } else {
    load_translation_data();
  }
  if (ctx_.command != "train") return;
  std::printf("ctgrad train %s: %s%s, %lld parameters, %d threads\n", m_.name.c_str(), copy_ ? "task copy, " : "", m_.summary.c_str(),
              (long long)model_->parameter_count(), model_->threads());
  if (!copy_) {
    std::string others;
    for (const auto& [name, set] : other_tests_) others += " + " + std::to_string(set.size()) + " " + name;
    const std::string& d = c_.text("data");
    if (d != "sentences" && d != "ding" && d != "ding+wesnoth" && d != "debian" && d != "debian+ding+wesnoth")  // a user's pairs
      std::printf("%s: %lld training / %zu validation / %zu test pairs, shared BPE vocabulary of %d\n", training::printable(c_.text("data")).c_str(),
                  (long long)sentences_, val_.size(), test_.size(), vocab_);
    else
      std::printf("EN->DE (data=%s): %lld sentence pairs and %lld %s train (%.1f phrases per pair an epoch) / %zu validation / "
                  "%zu test sentence pairs%s, shared BPE vocabulary of %d\n",
                  c_.text("data").c_str(), (long long)sentences_, (long long)(std::int64_t(train_.size()) - sentences_),
                  c_.text("data").rfind("debian", 0) == 0 ? "phrases and labels" : "dictionary phrases", c_.real("phrase_weight"),
                  val_.size(), test_.size(), others.empty() ? "" : (" (" + others.substr(3) + ")").c_str(), vocab_);
    if (dropped_ > 0) std::printf("%zu pairs dropped: a side of theirs is a held-out pair's (or, of a game test pair, trains)\n", dropped_);
    if (c_.integer("batch_tokens") > 0) std::printf("batches of up to %lld tokens (rows x longest side)\n", (long long)c_.integer("batch_tokens"));
  }
}

checkpoint::Metadata TranslationSession::metadata() {
  if (copy_) return {};
  return {{"tokenizer", "tokenizer.model"}, {"tokenizer_hash", file_hash(ctx_.folder.file("tokenizer.model"))}};
}

std::vector<std::string> TranslationSession::metrics() const {
  if (!copy_ && c_.integer("val_bleu") > 0) return {"loss", "bleu"};
  return {"loss"};
}

training::LoopOptions TranslationSession::loop() {
  return {.steps = c_.integer("steps"),
          .eval_every = c_.integer("eval_every"),
          .clip = m_.clip,
          .lr = m_.lr,
          .unit = "nats/token (NLL)",
          .items = "tok",
          .keep_checkpoints = int(c_.integer("keep_checkpoints"))};
}

training::Run TranslationSession::run() {
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

int TranslationSession::after_training(const training::Outcome&) {
  auto tr = translator();
  for (std::size_t i = 0; i < std::min<std::size_t>(val_.size(), 3) && !training::interrupted(); ++i) {
    const auto out = tr->greedy(val_[i].src, copy_ ? 1 : kBos, copy_ ? -1 : kEos, copy_ ? 9 : int(max_len_));
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

}  // namespace ctgrad::cli::translation
