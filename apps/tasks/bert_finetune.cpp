// ctgrad finetune bert --task austen-novel (= ctgrad train bert-finetune): sentence classification
// from the <cls> vector (pooler dense + tanh, dropout, linear), d2l's fine-tuning recipe. The
// encoder starts from a pretrained `ctgrad train bert` run, loaded by name (or, for the
// comparison, from scratch with the same tokenizer); the head starts new. Tasks: which of Austen's
// six novels a passage of 1-3 sentences comes from, held-out passages from the novels' last tenth
// (which pretraining held out too); or a user's labelled text (task=labels, data=FILE), its label
// set read from the data and saved in the checkpoint.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <set>

#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/hf_tokenizer.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/text_source.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/training/escape.hpp>

#include <ctgrad/base/random.hpp>
#include <ctgrad/models/bert.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>

#include "../task.hpp"
#include "bert_data.hpp"
#include "bert_finetune_init.hpp"
#include "bert_session.hpp"

namespace ctgrad::cli {
namespace {

namespace in = models::bert_inputs;
namespace fs = std::filesystem;

using corpus::austen_passages;
using corpus::kNovels;
using corpus::Passage;
using corpus::Passages;

// The small preset's graph, frozen at run time: its hyperparameters are every size's.
const RuntimeGraph kHyperGraph = freeze(models::bert_classifier(models::kBertSmall, kNovels));

Schema finetune_schema() {
  Schema s;
  bert::add_bert_model_keys(s, "preset: the pretrained run's", "pre-norm encoder layers: the pretrained run's");
  s.choice("task", "austen-novel", {"austen-novel", "labels"},
           "austen-novel: which of Austen's six novels a passage of 1-3 sentences is from; labels: your labelled text (data=FILE)", Role::model)
      .text("data", "", "task=labels: a TSV file (text, a tab, the label) or JSON Lines (text_field, label_field), or a glob of them", Role::run)
      .text("val_data", "", "task=labels: validation text as data (empty: the texts held out by val_fraction, by a hash of each)", Role::run)
      .real("val_fraction", 0.1, {.min = 0, .max = 0.5, .min_open = true}, "task=labels: the share of texts held out", Role::run)
      .text("text_field", "text", "task=labels, JSON Lines: the field of the text", Role::run)
      .text("label_field", "label", "task=labels, JSON Lines: the field of the label (a string or an integer)", Role::run)
      .text("pretrained", "runs/bert", "a `ctgrad train bert` run folder: its tokenizer, and its encoder unless init=scratch (--from DIR: a Hugging Face BERT folder instead)", Role::run)
      .choice("tokenizer", "sentencepiece", {"sentencepiece", "hf"},
              "the vocabulary: SentencePiece's (a pretrained run's, or a model folder's tokenizer.model); hf: a model folder's tokenizer.json (--from sets it)", Role::model)
      .choice("init", "pretrained", {"pretrained", "scratch"}, "the encoder's start: the pretrained weights, or BERT's random init", Role::run)
      .choice("pool", "cls", {"cls", "mean"}, "the classifier reads the <cls> vector (BERT), or the mean of the row's vectors ([CLS] passage [SEP])", Role::model)
      .integer("context", 64, {.min = 8, .max = 1 << 16}, "tokens per passage, [CLS] and [SEP] included (longer ones are cut; at most the pretraining context)", Role::run)
      .integer("batch", 32, {.min = 1, .max = 1 << 14}, "passages per step", Role::run)
      .integer("steps", 600, {.min = 1, .max = std::int64_t(1) << 40}, "training steps")
      .real("lr", 3e-4, {.min = 0, .max = 10, .min_open = true}, "peak learning rate of the head (linear warm-up, then linear decay)")
      .real("encoder_lr", 1.0, {.min = 0, .max = 100}, "the encoder's learning rate as a fraction of lr")
      .integer("freeze", 0, {.min = 0, .max = 64}, "N > 0: the embeddings and the lowest N - 1 encoder layers are not trained")
      .integer("warmup", 60, {.min = 0}, "warm-up steps")
      .real("weight_decay", 0.01, {.min = 0, .max = 10}, "AdamW's decoupled decay (not on biases and norms)")
      .real("clip", 1.0, {.min = 0}, "global gradient-norm bound (0: none)")
      .integer("eval_every", 200, {.min = 1}, "steps between validations and checkpoints")
      .integer("train_passages", 0, {.min = 0}, "N > 0: train on N labelled passages only (a fixed random subset): the label budget", Role::run);
  s.stated_when_set({"data", "val_data", "val_fraction", "text_field", "label_field", "tokenizer"});
  add_common_keys(s);
  add_hyper_keys(s, kHyperGraph);
  return s;
}

// task=labels: the labelled texts of a config (data, or val_data), bad input one line.
std::vector<data::LabelledText> labelled(const Config& c, const std::string& key) {
  try {
    return data::read_labelled(c.text(key), {.text_field = c.text("text_field"), .label_field = c.text("label_field")});
  } catch (const data::data_error& e) {
    throw config_error(message_of(e));
  }
}

// The classes: the novels; a checkpoint's label set (eval, resume); or the training data's labels, sorted.
std::vector<std::string> class_names(const Config& c, const Context& ctx) {
  if (c.text("task") != "labels") return {};  // the novels' titles come with their passages
  if (c.text("data").empty()) throw config_error("task=labels needs --set data=FILE (a TSV or JSON Lines file of labelled text)");
  if (ctx.from_checkpoint) {
    auto labels = names_from_checkpoint(ctx.folder.checkpoint(), "labels");
    if (!std::is_sorted(labels.begin(), labels.end()) || std::adjacent_find(labels.begin(), labels.end()) != labels.end())
      throw config_error("the checkpoint " + ctx.folder.checkpoint().string() + " records a label set that is not sorted and distinct");
    return labels;
  }
  std::set<std::string> seen;
  for (const auto& t : labelled(c, "data")) seen.insert(t.label);
  if (seen.size() < 2) throw config_error("data " + training::printable(c.text("data")) + " has " + std::to_string(seen.size()) + " label: a classifier needs two or more");
  if (seen.size() > 10000) throw config_error("data " + training::printable(c.text("data")) + " has " + std::to_string(seen.size()) + " labels, more than 10000");
  return {seen.begin(), seen.end()};
}

class FinetuneSession : public Session {
 public:
  FinetuneSession(const Config& c, const Context& ctx)
      : P(bert::bert_config(c)), c_(c), ctx_(ctx), classes_(class_names(c, ctx)), n_(classes_.empty() ? kNovels : int(classes_.size())),
        planned_(plan_model([this] { return models::bert_classifier(P, n_); })),
        model_(planned_, program_options(c, ctx.threads, planned_->graph())), opt_(model_.parameters(), adam_options(c), bert::finetune_groups(c)),
        context_(c.integer("context")), batch_(c.integer("batch")) {
    if (context_ > P.context)
      throw config_error("context " + c.show("context") + " is longer than the model reads (max_context " + std::to_string(P.context) + ")");
    if (c.integer("freeze") > P.n_layer + 1)
      throw config_error("freeze " + c.show("freeze") + ": the model has the embeddings and " + std::to_string(P.n_layer) +
                         " layers (freeze at most " + std::to_string(P.n_layer + 1) + ")");
    check_fits(model_, {batch_, context_, 1, 1, 1, 1}, 8.0 * double(batch_) * double(context_), "batch " + c.show("batch") + " x context " + c.show("context"));
  }
  Executor<float>& model() override { return model_; }
  optim::Optimizer<float>& optimizer() override { return opt_; }

  void prepare() override {
    // The data first: a refused start writes nothing (the pretrained tokenizer is copied last).
    Passages p = c_.text("task") == "labels" ? labelled_passages() : austen_passages(ctx_.cache);
    if (p.validation.empty())
      throw config_error("no validation text: none of the labelled texts is held out by val_fraction (a text and its duplicates share a side): "
                         "give val_data, or more distinct texts");
    if (p.train.empty() && ctx_.command == "train") throw config_error("no training text: every labelled text is held out");
    const bool hf = c_.text("tokenizer") == "hf";
    const fs::path own = ctx_.folder.file(hf ? "tokenizer.json" : "tokenizer.model");
    if (hf && ctx_.pretrained.empty() && !ctx_.from_checkpoint)
      throw config_error("tokenizer=hf is a Hugging Face model folder's tokenizer.json: give the folder with --from DIR");
    if (!ctx_.pretrained.empty() && ctx_.command != "train")
      throw config_error("--from starts a fine-tuning (ctgrad finetune bert --from DIR); eval bert-finetune reads a fine-tuned run: give --run");
    if (!ctx_.pretrained.empty() && c_.text("init") == "scratch")
      throw config_error("init=scratch starts the encoder from BERT's random init; --from loads the folder's: give one");
    const fs::path source = !ctx_.pretrained.empty() ? ctx_.pretrained / own.filename() : own;
    try {
      if (ctx_.from_checkpoint || !ctx_.pretrained.empty()) {
        if (hf) tok_ = std::make_unique<data::HfTokenizer>(data::HfTokenizer::load(source));
        else tok_ = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::load(source));
      } else {
        tok_ = std::make_unique<data::SentencePieceTokenizer>(bert::start_from_pretrained(c_, model_, own));
      }
    } catch (const data::data_error& e) {
      throw config_error(message_of(e));
    }
    // [CLS] passage [SEP], padded with [PAD]: their ids in this vocabulary.
    auto id_of = [&](const std::string& token) -> std::int32_t {
      if (const auto* h = dynamic_cast<const data::HfTokenizer*>(tok_.get())) return h->token_id(token);
      return static_cast<const data::SentencePieceTokenizer&>(*tok_).piece_id(token);
    };
    cls_ = id_of("[CLS]"), sep_ = id_of("[SEP]"), pad_ = std::max(id_of("[PAD]"), 0);
    if (tok_->vocab_size() > P.vocab || cls_ < 0 || sep_ < 0)
      throw config_error(source.string() + " is not a BERT vocabulary of at most " + std::to_string(P.vocab) + " tokens with [CLS] and [SEP] (it has " +
                         std::to_string(tok_->vocab_size()) + " tokens" + (cls_ < 0 || sep_ < 0 ? ", no [CLS] or [SEP])" : ")"));
    if (!ctx_.pretrained.empty()) tok_->save(own);  // the folder's tokenizer becomes the run's (train only: eval --from is refused above)
    titles_ = p.titles;
    if (const std::int64_t n = c_.integer("train_passages"); n > 0)  // the same subset for every seed and init
      data::fixed_subset(p.train, std::size_t(n), "train_passages");
    train_ = encode(p.train), val_ = encode(p.validation);
    order_ = data::EpochOrder(train_.size(), data_seed(c_), 11);
    const std::string encoder = c_.text("init") == "scratch" ? "from scratch" : "from " + c_.text("pretrained");
    std::printf("ctgrad finetune bert: task %s, %d layers, d_model %d, encoder %s, %lld parameters, %d threads\n", c_.text("task").c_str(), P.n_layer,
                P.d_model, training::printable(encoder).c_str(), (long long)model_.parameter_count(), model_.threads());
    std::printf("%s (train / validation):\n", classes_.empty() ? "passages of 1-3 sentences" : ("labelled texts of " + training::printable(c_.text("data"))).c_str());
    std::vector<std::int64_t> tr(static_cast<std::size_t>(n_)), va(static_cast<std::size_t>(n_));
    for (const auto& e : train_) ++tr[std::size_t(e.label)];
    for (const auto& e : val_) ++va[std::size_t(e.label)];
    for (int k = 0; k < std::min(n_, 50); ++k)
      std::printf("  %-22s %6lld (%4.1f%%) / %5lld (%4.1f%%)\n", training::printable(titles_[std::size_t(k)]).c_str(), (long long)tr[std::size_t(k)],
                  100.0 * double(tr[std::size_t(k)]) / double(std::max<std::size_t>(train_.size(), 1)), (long long)va[std::size_t(k)],
                  100.0 * double(va[std::size_t(k)]) / double(val_.size()));
    const auto majority = std::max_element(va.begin(), va.end());
    majority_ = double(*majority) / double(val_.size());
    std::printf("majority-class baseline on validation: accuracy %.4f (always %s)\n", majority_, training::printable(titles_[std::size_t(majority - va.begin())]).c_str());
  }

  checkpoint::Metadata metadata() override {
    checkpoint::Metadata m = tokenizer_metadata(ctx_.folder, c_.text("tokenizer") == "hf" ? "tokenizer.json" : "tokenizer.model");
    if (!classes_.empty()) m["labels"] = names_metadata(classes_);  // the class of each output, for eval and resume
    return m;
  }

  std::vector<std::string> metrics() const override { return {"loss", "accuracy"}; }
  training::LoopOptions loop() override {
    return step_loop(c_, optim::warmup_linear(c_.real("lr"), 0.0, c_.integer("warmup"), c_.integer("steps")), "nats/passage", "passages");
  }

  training::Run run() override {
    return {.model = model_,
            .optimizer = opt_,
            .feed =
                [this](std::int64_t step) {
                  set_batch(train_, order_.batch_rows(step, batch_));
                  return double(batch_);
                },
            .validate = [this] {
              const Scores s = validate();
              return training::Metrics{{{"loss", s.loss}, {"accuracy", s.accuracy}}};
            }};
  }

  int eval(const Config&) override {
    const Stopwatch time;
    const Scores s = validate();
    if (training::interrupted()) return 130;
    std::printf("validation: accuracy %.4f (majority-class baseline %.4f), loss %.4f nats/passage (%zu passages, %.1f s)\n\n", s.accuracy,
                majority_, s.loss, val_.size(), time.seconds());
    if (n_ > 20) return 0;  // a confusion matrix of more classes would not be read
    std::printf("confusion matrix (rows: true %s, columns: predicted)\n%-22s", classes_.empty() ? "novel" : "label", "");
    for (int k = 0; k < n_; ++k) std::printf(" %6d", k);
    std::printf("  accuracy\n");
    for (int r = 0; r < n_; ++r) {
      std::int64_t n = 0;
      std::printf("%d %-20.20s", r, training::printable(titles_[std::size_t(r)]).c_str());
      for (int k = 0; k < n_; ++k) std::printf(" %6lld", (long long)s.confusion[std::size_t(r * n_ + k)]), n += s.confusion[std::size_t(r * n_ + k)];
      std::printf("  %.4f\n", double(s.confusion[std::size_t(r * n_ + r)]) / double(std::max<std::int64_t>(n, 1)));
    }
    return 0;
  }

 private:
  struct Example {
    std::vector<std::int32_t> ids;  // [CLS] passage [SEP]
    int label;
  };
  struct Scores {
    double loss = 0, accuracy = 0;
    std::vector<std::int64_t> confusion;
  };

  static optim::AdamOptions adam_options(const Config& c) { return {.lr = c.real("lr"), .weight_decay = c.real("weight_decay")}; }

  // task=labels: the data's texts, held out by a hash of each (or val_data), labelled by classes_.
  Passages labelled_passages() const {
    Passages p;
    p.titles = classes_;
    auto label_of = [&](const data::LabelledText& t) {
      const auto it = std::lower_bound(classes_.begin(), classes_.end(), t.label);
      if (it == classes_.end() || *it != t.label)
        throw config_error("the label '" + training::printable(t.label) + "' is not one of the run's " + std::to_string(classes_.size()) + " labels");
      return int(it - classes_.begin());
    };
    const bool by_hash = c_.text("val_data").empty();
    if (ctx_.command == "train" || by_hash)
      for (auto& t : labelled(c_, "data")) {
        const bool held = by_hash && data::held_out(t.text, c_.real("val_fraction"));
        if (!held && ctx_.command != "train") continue;
        (held ? p.validation : p.train).push_back({std::move(t.text), label_of(t)});
      }
    if (!by_hash)
      for (auto& t : labelled(c_, "val_data")) p.validation.push_back({std::move(t.text), label_of(t)});
    return p;
  }

  std::vector<Example> encode(const std::vector<Passage>& ps) {
    std::vector<Example> out;
    out.reserve(ps.size());
    std::vector<std::string> texts;
    for (const Passage& p : ps) texts.push_back(p.text);
    std::vector<std::vector<std::int32_t>> encoded;
    if (const auto* sp = dynamic_cast<const data::SentencePieceTokenizer*>(tok_.get())) {
      model_.execute([&] { encoded = sp->encode_all(texts, ctx_.cache); });
    } else {
      encoded.resize(texts.size());
      for (std::size_t i = 0; i < texts.size(); ++i) encoded[i] = tok_->encode(texts[i]);
    }
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const Passage& p = ps[i];
      Example e{{cls_}, p.label};
      auto& ids = encoded[i];
      ids.resize(std::min<std::size_t>(ids.size(), std::size_t(context_ - 2)));
      e.ids.insert(e.ids.end(), ids.begin(), ids.end());
      e.ids.push_back(sep_);
      out.push_back(std::move(e));
    }
    return out;
  }

  void set_batch(const std::vector<Example>& set, const std::vector<std::size_t>& rows) {
    std::int64_t seq = 0;
    for (std::size_t r : rows) seq = std::max<std::int64_t>(seq, std::int64_t(set[r].ids.size()));
    const std::int64_t b = std::int64_t(rows.size());
    ids_.assign(std::size_t(b * seq), pad_), segments_.assign(std::size_t(b * seq), 0), lengths_.clear(), labels_.clear();
    pool_.assign(std::size_t(b * seq), 0.0f);
    const bool mean = c_.text("pool") == "mean";
    for (std::int64_t j = 0; j < b; ++j) {
      const auto& e = set[rows[std::size_t(j)]];
      std::copy(e.ids.begin(), e.ids.end(), ids_.begin() + j * seq);
      lengths_.push_back(std::int32_t(e.ids.size())), labels_.push_back(e.label);
      if (mean) std::fill_n(pool_.begin() + j * seq, e.ids.size(), 1.0f / float(e.ids.size()));  // [CLS] passage [SEP]
      else pool_[std::size_t(j * seq)] = 1.0f;
    }
    model_.set_input(in::ids, std::span<const std::int32_t>(ids_), {b, seq});
    model_.set_input(in::segments, std::span<const std::int32_t>(segments_), {b, seq});
    model_.set_input(in::lengths, std::span<const std::int32_t>(lengths_), {b});
    model_.set_input(in::labels, std::span<const std::int32_t>(labels_), {b});
    model_.set_input(in::pool, std::span<const float>(pool_), {b, seq});
  }

  Scores validate() {
    Scores s;
    s.confusion.assign(std::size_t(n_ * n_), 0);
    std::int64_t right = 0;
    for (std::size_t first = 0; first < val_.size() && !training::interrupted(); first += std::size_t(batch_)) {
      std::vector<std::size_t> rows(std::min(std::size_t(batch_), val_.size() - first));
      std::iota(rows.begin(), rows.end(), first);
      set_batch(val_, rows);
      model_.forward(Mode::infer);
      s.loss += double(model_.loss()) * double(rows.size());
      const auto logits = model_.output("logits");
      for (std::size_t j = 0; j < rows.size(); ++j) {
        const float* row = logits.data + std::int64_t(j) * n_;
        const int pred = int(std::max_element(row, row + n_) - row), truth = val_[rows[j]].label;
        right += pred == truth;
        ++s.confusion[std::size_t(truth * n_ + pred)];
      }
    }
    s.loss /= double(std::max<std::size_t>(val_.size(), 1));
    s.accuracy = double(right) / double(std::max<std::size_t>(val_.size(), 1));
    return s;
  }

  models::BertConfig P;
  Config c_;
  Context ctx_;
  std::vector<std::string> classes_;  // task=labels: the labels, sorted (output k is classes_[k])
  int n_;                             // classes
  std::shared_ptr<const PlannedGraph> planned_;
  Program<run_time> model_;
  optim::AdamW<float> opt_;
  std::int64_t context_, batch_;
  std::unique_ptr<data::Tokenizer> tok_;
  std::int32_t cls_ = 0, sep_ = 0, pad_ = 0;
  std::vector<std::string> titles_;
  std::vector<Example> train_, val_;
  double majority_ = 0;
  data::EpochOrder order_;  // the training examples, epoch by epoch
  std::vector<std::int32_t> ids_, segments_, lengths_, labels_;
  std::vector<float> pool_;
};

Task finetune_task() {
  Task t;
  t.name = "bert-finetune";
  t.summary = "BERT fine-tuned from a pretrained `train bert` run: which Austen novel a passage is from, or your labels (= ctgrad finetune bert)";
  t.schema = finetune_schema();
  t.input_folders = {"pretrained"};
  t.dependent_defaults = bert::fit_bert_context;
  t.check_against_checkpoint = refuse_longer_context;
  t.open = &open_session<FinetuneSession>;
  t.from_hf = [](const fs::path& dir, const pretrained::HfModel& m) {
    auto keys = bert::hf_keys(dir, m);
    keys.emplace_back("pretrained", dir.string());  // what the run's config says it started from
    return keys;
  };
  t.hf_head = [](std::string_view n) { return n.rfind("pooler.", 0) == 0 || n.rfind("cls.", 0) == 0; };  // loaded if the folder has a pooler
  return t;
}

const bool registered = register_task(finetune_task());

}  // namespace
}  // namespace ctgrad::cli
