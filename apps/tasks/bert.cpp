// ctgrad train|eval|fill-mask|finetune bert: BERT pretrained by masked language modelling on the
// KJV Bible and Jane Austen's novels (docs/models/bert.md), d2l's chapter on large-scale
// pretraining: one SentencePiece vocabulary with [PAD] [UNK] [CLS] [SEP] [MASK], sequences packed
// from whole verses and paragraphs, the paper's masking, then fine-tuning from the <cls> vector.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>

#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/data/mlm.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/bert.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

#include "../output_file.hpp"
#include "../task.hpp"
#include "bert_session.hpp"

namespace ctgrad::cli::bert {
namespace {

namespace fs = std::filesystem;

// The small preset's graph, frozen at run time: its hyperparameters are every size's.
const RuntimeGraph kHyperGraph = freeze(models::bert_mlm(models::kBertSmall));

const models::BertConfig& bert_preset(const std::string& size) {
  return size == "tiny" ? models::kBertTiny : size == "base" ? models::kBertBase : models::kBertSmall;
}

}  // namespace

void add_bert_model_keys(Schema& s, const std::string& size_help, const std::string& pre_norm_help) {
  s.choice("size", "small", {"tiny", "small", "base"}, size_help, Role::model);
  std::vector<PresetSizes> sizes;
  for (const char* n : {"tiny", "small", "base"}) {
    const models::BertConfig& p = bert_preset(n);
    sizes.push_back({n, p.d_model, p.n_layer, p.d_ff / p.d_model, p.vocab, p.context});
  }
  add_size_keys(s, sizes);
  s.integer("heads", 0, {.min = 0, .max = 1024}, "architecture: attention heads (0: the preset's: tiny 2, small 4, base 12)", Role::model)
      .flag("pre_norm", false, pre_norm_help, Role::model)
      .integer("segments", 2, {.min = 1, .max = 1 << 16}, "architecture: segment (token type) embeddings: sentence A and B", Role::model);
  s.stated_when_set({"heads", "segments"});
}

models::BertConfig bert_config(const Config& c) {
  const models::BertConfig& p = bert_preset(c.text("size"));
  models::BertConfig m = p;
  m.d_model = size_or(c, "d_model", p.d_model), m.n_layer = size_or(c, "layers", p.n_layer), m.heads = size_or(c, "heads", p.heads);
  m.d_ff = ff_width(c, m.d_model, p.d_ff / p.d_model, false), m.vocab = size_or(c, "vocab", p.vocab), m.context = size_or(c, "max_context", p.context);
  m.pre_norm = c.flag("pre_norm");
  m.segments = int(c.integer("segments"));
  if (c.schema().find("next_sentence")) m.next_sentence = c.flag("next_sentence");
  check_heads(m.d_model, m.heads, m.heads, false);
  return m;
}

std::vector<std::pair<std::string, std::string>> hf_keys(const fs::path& dir, const pretrained::HfModel& m) {
  if (!m.is_bert()) throw config_error("the folder holds a " + m.architecture + ": ctgrad's BERT reads BertForMaskedLM and BertForPreTraining folders (" + command_reading(m) + ")");
  const models::BertConfig& b = m.bert();
  std::error_code ec;
  const char* tokenizer = fs::exists(dir / "tokenizer.json", ec) ? "hf" : fs::exists(dir / "tokenizer.model", ec) ? "sentencepiece" : nullptr;
  if (!tokenizer) throw config_error("--from " + dir.string() + ": the folder holds no tokenizer.json (nor a SentencePiece tokenizer.model)");
  return {{"tokenizer", tokenizer}, {"d_model", std::to_string(b.d_model)}, {"layers", std::to_string(b.n_layer)},   {"heads", std::to_string(b.heads)},
          {"d_ff", std::to_string(b.d_ff)},       {"vocab", std::to_string(b.vocab)},      {"max_context", std::to_string(b.context)},
          {"segments", std::to_string(b.segments)}, {"pre_norm", "false"},                 {"norm_eps", exact(m.hyper("norm_eps", 1e-12))}};
}

BertVocab::BertVocab(data::HfTokenizer t) : hf_(std::make_shared<const data::HfTokenizer>(std::move(t))) {
  if (hf_->model_type() != "WordPiece")
    throw config_error("a BERT's tokenizer.json is a WordPiece vocabulary; this one is " + hf_->model_type());
}

BertVocab BertVocab::load(const fs::path& file) {
  try {
    if (file.extension() == ".json") return BertVocab(data::HfTokenizer::load(file));
    return BertVocab(data::SentencePieceTokenizer::load(file));
  } catch (const data::data_error& e) {
    throw config_error(message_of(e));
  }
}

bool BertVocab::starts_word(std::int32_t id) const {
  if (sp_) return sp_->starts_word(id);
  return hf_->token(id).rfind("##", 0) != 0;
}

std::pair<std::string, bool> BertVocab::written(std::int32_t id) const {
  static const std::string kWordStart = "\xe2\x96\x81";
  std::string p = piece(id);
  if (sp_) {
    const bool start = p.rfind(kWordStart, 0) == 0;
    return {start ? p.substr(kWordStart.size()) : p, start};
  }
  const bool start = p.rfind("##", 0) != 0;
  return {start ? p : p.substr(2), start};
}

std::vector<std::vector<std::int32_t>> BertVocab::encode_all(const std::vector<std::string>& texts, const data::DataCache& cache) const {
  if (sp_) return sp_->encode_all(texts, cache);
  std::vector<std::vector<std::int32_t>> out(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) out[i] = hf_->encode(texts[i]);
  return out;
}

data::MlmSpecials BertVocab::specials(const fs::path& file) const {
  if (sp_) {
    if (sp_->vocab_size() <= kSpecials.first_regular || sp_->piece(kSpecials.mask) != "[MASK]" || sp_->piece(kSpecials.cls) != "[CLS]" || sp_->piece(kSpecials.pad) != "[PAD]")
      throw config_error(file.string() + " is not a BERT vocabulary ([PAD] [UNK] [CLS] [SEP] [MASK] first)");
    data::MlmSpecials s = kSpecials;
    s.vocab = vocab_size();
    return s;
  }
  data::MlmSpecials s;
  std::int32_t* ids[] = {&s.pad, &s.unk, &s.cls, &s.sep, &s.mask};
  const char* names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  s.first_regular = 0;
  for (int i = 0; i < 5; ++i) {
    *ids[i] = hf_->token_id(names[i]);
    if (*ids[i] < 0) throw config_error(file.string() + " is not a BERT vocabulary: it has no " + names[i] + " token");
    s.first_regular = std::max(s.first_regular, *ids[i] + 1);  // the [unused] ids before the specials are never drawn
  }
  // Masking draws from the ids after the specials: a vocabulary with them at its end is not read.
  if (s.first_regular > vocab_size() / 2)
    throw config_error(file.string() + ": its specials are not at the start of the vocabulary ([PAD] [UNK] [CLS] [SEP] [MASK] up to id " +
                       std::to_string(s.first_regular - 1) + " of " + std::to_string(vocab_size()) + "), which ctgrad's masking assumes");
  s.vocab = vocab_size();
  return s;
}

void fit_bert_context(Config& c) {
  fit_context_to_model([](const Config& c) { return bert_preset(c.text("size")).context; })(c);
}

namespace {

Schema bert_schema() {
  Schema s;
  add_bert_model_keys(s, "preset, a bundle of sizes any size key overrides: tiny (tests), small (minutes here), base (BERT-base's shape)",
                      "pre-norm encoder layers and a final norm (off: post-norm, as the paper)");
  s.integer("context", 64, {.min = 8, .max = 1 << 16}, "tokens per sequence, [CLS] and [SEP] included (at most max_context; a longer one, max_context not given, grows the model with it)", Role::run)
      .integer("batch", 32, {.min = 1, .max = 1 << 14}, "sequences per step", Role::run)
      .integer("steps", 2000, {.min = 1, .max = std::int64_t(1) << 40}, "training steps")
      .real("lr", 1e-3, {.min = 0, .max = 10, .min_open = true}, "peak learning rate (linear warm-up, then linear decay, as BERT)")
      .integer("warmup", 200, {.min = 0}, "warm-up steps")
      .real("weight_decay", 0.01, {.min = 0, .max = 10}, "AdamW's decoupled decay (not on biases and norms)")
      .real("clip", 1.0, {.min = 0}, "global gradient-norm bound (0: none)")
      .real("select", 0.15, {.min = 0, .max = 1, .min_open = true}, "fraction of a sequence's tokens selected for prediction")
      .real("to_mask", 0.8, {.min = 0, .max = 1}, "of the selected: replaced by [MASK]")
      .real("to_random", 0.1, {.min = 0, .max = 1}, "of the selected: replaced by a random token (the rest stay)")
      .flag("whole_word", false, "select whole words (SentencePiece word starts)")
      .flag("next_sentence", false, "also next-sentence prediction on [CLS] A [SEP] B [SEP] pairs (BERT; off: RoBERTa)", Role::model)
      .choice("tokenizer", "sentencepiece", {"sentencepiece", "hf"},
              "SentencePiece BPE learnt on the training text; hf: a model folder's WordPiece tokenizer.json (--from sets it)", Role::model)
      .integer("eval_every", 250, {.min = 1}, "steps between validations and checkpoints")
      .integer("eval_sequences", 512, {.min = 0}, "validation sequences, evenly spaced over the held-out text (0: all)");
  s.stated_when_set({"tokenizer"});
  corpus::add_corpus_keys(s);
  add_common_keys(s);
  add_hyper_keys(s, kHyperGraph);
  return s;
}

using corpus::Corpus;
using corpus::load_corpus;

}  // namespace

Schema fill_mask_options() {
  Schema s;
  s.text("text", "And God said, Let there be [MASK].", "text with one or more [MASK]").integer("top-k", 5, {.min = 1, .max = 1000}, "candidates per mask");
  return s;
}

BertSession::BertSession(const Config& c, const Context& ctx)
    : p_(bert_config(c)), c_(c), ctx_(ctx), planned_(plan_model([this] { return models::bert_mlm(p_); })),
      model_(std::make_unique<Program<run_time>>(planned_, program_options(c, ctx.threads, planned_->graph()))),
      opt_(model_->parameters(), optim::AdamOptions{.lr = c.real("lr"), .weight_decay = c.real("weight_decay")}, {optim::no_decay_group()}),
      context_(c.integer("context")), batch_(c.integer("batch")) {
  if (context_ > p_.context)
    throw config_error("context " + c.show("context") + " is longer than the model reads (max_context " + std::to_string(p_.context) + ")");
  if (c.real("to_mask") + c.real("to_random") > 1)
    throw config_error("to_mask " + c.show("to_mask") + " + to_random " + c.show("to_random") + " is more than 1");
  const std::int64_t picks = batch_ * std::max<std::int64_t>(1, std::llround(c.real("select") * double(context_)));
  check_fits(*model_, {batch_, context_, 1, picks, 1, 1}, 24.0 * double(batch_) * double(context_),
             "batch " + c.show("batch") + " x context " + c.show("context"));
  check_shards(ctx, batch_, "batch");
  if (p_.next_sentence && ctx.shard.count > 1)  // its two losses average over different counts: no one weight per rank
    throw config_error("next_sentence=true does not train data-parallel yet: start it without mpirun");
}

void BertSession::prepare() {
  const bool hf = c_.text("tokenizer") == "hf";
  tok_name_ = hf ? "tokenizer.json" : "tokenizer.model";
  const fs::path tok_file = ctx_.folder.file(tok_name_);
  Corpus corpus;
  const fs::path source = ctx_.pretrained.empty() ? tok_file : ctx_.pretrained / tok_name_;
  if (!ctx_.pretrained.empty()) {  // the model folder's vocabulary becomes the run's
    tok_.emplace(BertVocab::load(source));
  } else if (hf && !ctx_.from_checkpoint) {
    throw config_error("tokenizer=hf is a Hugging Face model folder's tokenizer.json: give the folder with --from DIR");
  } else if (ctx_.from_checkpoint) {
    tok_.emplace(BertVocab::load(tok_file));
  } else {
    corpus = corpus::corpus_of(c_, ctx_.cache);
    std::string text;
    for (const auto& u : corpus.train) text += u + "\n";
    tok_.emplace(data::SentencePieceTokenizer::train(text, ctx_.folder.file("tokenizer"),
                                                     {.vocab_size = p_.vocab, .model_type = "bpe", .seed = data_seed(c_), .unk_id = 1,
                                                      .bos_id = -1, .eos_id = -1, .pad_id = 0, .unk_piece = "[UNK]", .pad_piece = "[PAD]",
                                                      .user_defined_symbols = {"[CLS]", "[SEP]", "[MASK]"}},
                                                     ctx_.cache));
  }
  vocab_ = tok_->vocab_size();
  if (vocab_ > p_.vocab)
    throw config_error("the tokenizer has " + std::to_string(vocab_) + " tokens, more than the model's vocabulary of " + std::to_string(p_.vocab) + " (vocab)");
  specials_ = tok_->specials(source);
  if (ctx_.command == "fill-mask") return;
  if (corpus.train.empty()) corpus = corpus::corpus_of(c_, ctx_.cache);
  word_starts_.assign(std::size_t(vocab_), 0);
  for (std::int32_t id = 0; id < vocab_; ++id) word_starts_[std::size_t(id)] = tok_->starts_word(id);
  // Units packed whole into sequences, document by document; with next-sentence prediction each
  // sequence is half a row, and has_next says whether the following one continues its document.
  auto sequences = [&](const std::vector<std::string>& units, const std::vector<std::size_t>& docs, std::vector<std::int64_t>& counts,
                       std::vector<std::uint8_t>& has_next) {
    std::vector<std::vector<std::int32_t>> out, all;
    model_->execute([&] { all = tok_->encode_all(units, ctx_.cache); });
    const std::size_t max_tokens = p_.next_sentence ? std::size_t(context_ - 3) / 2 : std::size_t(context_ - 2);
    for (std::size_t d = 0; d < docs.size(); ++d) {
      std::vector<std::vector<std::int32_t>> ids;
      for (std::size_t u = docs[d]; u < (d + 1 < docs.size() ? docs[d + 1] : units.size()); ++u) {
        ids.push_back(std::move(all[u]));
        for (std::int32_t t : ids.back()) ++counts[std::size_t(t)];
      }
      auto packed = data::pack_units(ids, max_tokens);
      for (std::size_t i = 0; i < packed.size(); ++i) has_next.push_back(i + 1 < packed.size());
      out.insert(out.end(), std::make_move_iterator(packed.begin()), std::make_move_iterator(packed.end()));
    }
    return out;
  };
  std::vector<std::int64_t> train_counts(static_cast<std::size_t>(vocab_)), val_counts(static_cast<std::size_t>(vocab_));
  std::vector<std::uint8_t> val_next, train_next;
  val_seqs_ = sequences(corpus.validation, corpus.validation_docs, val_counts, val_next);
  const std::int64_t n_val = c_.integer("eval_sequences") > 0 ? std::min<std::int64_t>(c_.integer("eval_sequences"), std::int64_t(val_seqs_.size()))
                                                               : std::int64_t(val_seqs_.size());
  if (n_val < std::int64_t(val_seqs_.size())) {
    // Evenly spaced over the split, so that every document is in; with next-sentence pairs, a
    // kept sequence brings the one after it (its continuation, when it has one).
    const std::int64_t group = p_.next_sentence ? 2 : 1, n = std::max<std::int64_t>(p_.next_sentence ? 2 : 1, n_val / group);
    const double stride = double(std::int64_t(val_seqs_.size()) - group + 1) / double(n);
    std::vector<std::vector<std::int32_t>> kept;
    std::vector<std::uint8_t> kept_next;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::size_t at = std::size_t(double(i) * stride);
      for (std::int64_t j = 0; j < group; ++j) {
        kept.push_back(val_seqs_[at + std::size_t(j)]);
        kept_next.push_back(j + 1 < group ? val_next[at] : 0);
      }
    }
    val_seqs_ = std::move(kept), val_next = std::move(kept_next);
  }
  const data::MaskingOptions masking{.select = c_.real("select"), .to_mask = c_.real("to_mask"), .to_random = c_.real("to_random"),
                                     .whole_word = c_.flag("whole_word")};
  val_.emplace(val_seqs_, specials_, masking, batch_, data_seed(c_), word_starts_);
  if (p_.next_sentence) val_->next_sentence(val_next);
  if (ctx_.command != "train" && ctx_.command != "export-batches") return;
  train_seqs_ = sequences(corpus.train, corpus.train_docs, train_counts, train_next);
  train_.emplace(train_seqs_, specials_, masking, batch_, data_seed(c_), word_starts_);
  if (p_.next_sentence) train_->next_sentence(train_next);
  if (ctx_.command != "train") return;
  if (!ctx_.pretrained.empty()) tok_->tokenizer().save(tok_file);  // the folder's vocabulary becomes the run's, once its data is read
  unigram_ = train_counts;
  std::int64_t tokens = 0;
  for (const auto& s : train_seqs_) tokens += std::int64_t(s.size());
  std::printf("ctgrad train bert: size %s (%d layers, %d heads, d_model %d, d_ff %d), %lld parameters, %d threads\n", c_.text("size").c_str(),
              p_.n_layer, p_.heads, p_.d_model, p_.d_ff, (long long)model_->parameter_count(), model_->threads());
  std::printf("KJV + Austen: %zu train / %zu validation units -> %zu / %zu sequences of <= %lld tokens%s (%lld train tokens); "
              "%s with %d tokens; batch %lld, %lld steps, %s masking\n",
              corpus.train.size(), corpus.validation.size(), train_seqs_.size(), val_seqs_.size(),
              (long long)(p_.next_sentence ? (context_ - 3) / 2 : context_ - 2), p_.next_sentence ? ", two to a row (next-sentence pairs)" : "",
              (long long)tokens, tok_name_ == "tokenizer.json" ? "WordPiece" : "SentencePiece", vocab_, (long long)batch_, (long long)c_.integer("steps"), c_.flag("whole_word") ? "whole-word" : "token");
  const Baseline b = unigram_baseline();
  std::printf("unigram baseline on the validation masks: loss %.4f nats/token, accuracy %.4f (always '%s')\n", b.loss, b.accuracy,
              tok_->piece(b.most_frequent).c_str());
}

checkpoint::Metadata BertSession::metadata() { return tokenizer_metadata(ctx_.folder, tok_name_); }

std::vector<std::string> BertSession::metrics() const {
  std::vector<std::string> m{"loss", "accuracy"};
  if (p_.next_sentence) m.push_back("next_sentence_accuracy");
  return m;
}

training::LoopOptions BertSession::loop() {
  return step_loop(c_, optim::warmup_linear(c_.real("lr"), 0.0, c_.integer("warmup"), c_.integer("steps")), "nats/token", "tok");
}

training::Run BertSession::run() {
  return {.model = *model_,
          .optimizer = opt_,
          .feed =
              [this](std::int64_t step) {
                train_->draw(std::uint64_t(step));
                set_batch(*train_, ctx_.shard);
                const auto lengths = train_->lengths().subspan(std::size_t(ctx_.shard.begin(batch_)), std::size_t(ctx_.shard.rows(batch_)));
                return double(std::accumulate(lengths.begin(), lengths.end(), std::int64_t(0)));
              },
          .validate = [this] {
            const Scores v = validate();
            training::Metrics m{{{"loss", v.loss}, {"accuracy", v.accuracy}}};
            if (p_.next_sentence) m.values.push_back({"next_sentence_accuracy", v.next_sentence_accuracy});
            return m;
          },
          .loss_terms = [this] { return double(shard_picks_); }};
}

int BertSession::eval(const Config&) {
  const auto t0 = std::chrono::steady_clock::now();
  const Scores v = validate();
  if (training::interrupted()) return 130;
  if (!std::isfinite(v.loss)) throw std::runtime_error("the validation loss is not finite: the checkpoint's model is broken");
  std::printf("validation: MLM loss %.4f nats/token, masked-token accuracy %.4f", v.loss, v.accuracy);
  if (p_.next_sentence) std::printf(", next-sentence accuracy %.4f (balanced: chance is 0.5)", v.next_sentence_accuracy);
  std::printf(" (%zu sequences, %.1f s)\n", val_seqs_.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

// What the model learned, shown: the masked-token accuracy against the baseline, and a fill-mask.
int BertSession::after_training(const training::Outcome& out) {
  for (const auto& [name, value] : out.last_validation.values)
    if (name == "accuracy") std::printf("masked-token accuracy %.4f (unigram baseline %.4f)\n", value, unigram_baseline().accuracy);
  return fill_mask(fill_mask_options().defaults());
}

int BertSession::command(const std::string& name, const Config& o) {
  if (name == "fill-mask") return fill_mask(o);
  if (name == "export-batches") return export_batches(o);
  return Session::command(name, o);
}

namespace {

Task bert_task() {
  Task t;
  t.name = "bert";
  t.summary = "encoder-only masked LM (BERT) on the KJV Bible and Jane Austen or your text (--set data=PATH), fill-mask";
  t.input_folders = {"data", "val_data"};
  t.schema = bert_schema();
  t.data_parallel = true;
  t.commands.push_back({"fill-mask", "the top-k tokens, with probabilities, for each [MASK] of a text", fill_mask_options()});
  t.dependent_defaults = fit_bert_context;
  Schema exp;
  exp.integer("steps", 2000, {.min = 1, .max = 1 << 20}, "training steps to export").text("out", "bert_batches.safetensors", "the file to write").flag("overwrite", false, "replace an existing --out file");
  t.commands.push_back({"export-batches", "the run's training batches (steps 1..N) and validation batches, for another framework", exp});
  t.training_commands.push_back({"finetune", "bert-finetune", "a classifier from the pretrained run (--pretrained DIR) on a task (--task austen-novel)",
                                 {"task", "pretrained", "init"}});
  t.open = &open_session<BertSession>;
  t.check_against_checkpoint = refuse_longer_context;
  t.from_hf = [](const fs::path& dir, const pretrained::HfModel& m) {
    auto keys = hf_keys(dir, m);
    keys.emplace_back("next_sentence", m.bert().next_sentence ? "true" : "false");
    return keys;
  };
  t.to_hf = [](const Config& c, const Context&, pretrained::HfModel& m) {
    m = pretrained::hf_model_of(bert_config(c), {{"norm_eps", c.real("norm_eps")}, {"dropout", c.real("dropout")}});
  };
  return t;
}

const bool registered = register_task(bert_task());

}  // namespace
}  // namespace ctgrad::cli::bert
