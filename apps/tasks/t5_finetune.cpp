// ctgrad finetune t5 --task T (= ctgrad train t5-finetune --set task=T): text-to-text fine-tuning
// of a pretrained T5 (all its weights, loaded by name; or from scratch with the same vocabulary),
// T5's way: every task is text in, text out, named only by a prefix of the input.
//   translate-en-de  "translate English to German: <en>"  -> "<de>"   (the Ding dictionary's sentence pairs)
//   translate-de-en  "translate German to English: <de>"  -> "<en>"
//   austen-novel     "austen novel: <passage>"           -> "<title>"   (which of Austen's six novels)
//   mix:a,b,...      one stream of all their examples: each minibatch mixes tasks, in proportion
//                    to their sizes (T5's examples-proportional mixing)
// Evaluation per task on its test examples: corpus BLEU (greedy and beam) for translation, exact-
// match accuracy of the decoded title for the novels.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>

#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>
#include <ctgrad/data/pairs.hpp>
#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/metrics/bleu.hpp>
#include <ctgrad/models/t5.hpp>

#include "../task.hpp"
#include "t5_common.hpp"
#include "t5_finetune_tasks.hpp"
#include "text_corpus.hpp"

namespace ctgrad::cli {
namespace {

using namespace t5;

Schema finetune_schema() {
  Schema s;
  add_model_keys(s);
  s.text("task", "translate-en-de",
         "translate-en-de, translate-de-en, austen-novel, pairs (your text pairs: data=FILE), labels (your labelled text: data=FILE), or a mixture "
         "mix:a,b,... (one minibatch holds several tasks)",
         Role::model)
      .text("data", "", "task pairs: a TSV or JSON Lines file of text pairs, or pairs:SOURCE,TARGET; task labels: TSV, CSV or JSON Lines of labelled text",
            Role::run)
      .text("prefix", "", "tasks pairs and labels: the text put before each input (T5's task prefix, \"summarize: \")", Role::model)
      .text("source_field", "en", "task pairs, JSON Lines: the source's field", Role::run)
      .text("target_field", "de", "task pairs, JSON Lines: the target's field", Role::run)
      .text("text_field", "text", "task labels, JSON Lines or CSV: the text's field", Role::run)
      .text("label_field", "label", "task labels, JSON Lines or CSV: the label's field", Role::run)
      .text("pretrained", "runs/t5", "a `ctgrad train t5` run folder: its tokenizer, and its weights unless init=scratch", Role::run)
      .choice("init", "pretrained", {"pretrained", "scratch"}, "the model's start: the pretrained weights, or T5's random init", Role::run)
      .integer("context", 96, {.min = 4, .max = 1 << 16}, "input tokens at most (prefix and </s> included; longer inputs are cut)", Role::run)
      .integer("target_len", 64, {.min = 2, .max = 1 << 16}, "target tokens at most (</s> included; longer targets are cut)", Role::run)
      .integer("batch", 32, {.min = 1, .max = 1 << 14}, "examples per step", Role::run)
      .integer("steps", 1000, {.min = 1, .max = std::int64_t(1) << 40}, "training steps")
      .integer("eval_every", 500, {.min = 1}, "steps between validations and checkpoints")
      .integer("eval_examples", 500, {.min = 0}, "test examples per task for BLEU and accuracy (0: all)")
      .integer("beam", 4, {.min = 1, .max = 1000}, "beam width of the evaluation's beam search")
      .real("alpha", 0.6, {.min = 0, .max = 10}, "length penalty of the beam search");
  s.stated_when_set({"data", "prefix", "source_field", "target_field", "text_field", "label_field"});
  add_optimizer_keys(s, {.lr_help = "0: the optimizer's default (Adafactor: a constant 0.01, scaled by each weight's RMS; AdamW: 3e-4 peak)"});
  add_common_keys(s);
  add_hyper_keys(s, hyper_graph());  // dropout 0.1: T5 v1.1 fine-tunes with it
  return s;
}

class FinetuneSession : public Session {
 public:
  FinetuneSession(const Config& c, const Context& ctx)
      : P(t5_config(c)), end_(sentinel_end(c)), c_(c), ctx_(ctx), planned_(plan_model([this] { return models::t5(P); })), names_(parse_tasks(c.text("task"))), model_(planned_, program_options(c, ctx.threads, planned_->graph())),
        opt_(make_optimizer(with_default_lr(c), model_)), context_(c.integer("context")), target_len_(c.integer("target_len")), batch_(c.integer("batch")) {
    check_fits(model_, {batch_, target_len_, context_, 1, 1, 1}, 16.0 * double(batch_) * double(context_ + target_len_),
               "batch " + c.show("batch") + " x context " + c.show("context"));
    check_shards(ctx, batch_, "batch");
  }
  Executor<float>& model() override { return model_; }
  optim::Optimizer<float>& optimizer() override { return *opt_; }

  void prepare() override {
    // The tasks' text first: bad data is refused before the pretrained tokenizer is copied in.
    for (std::size_t i = 0; i < names_.size(); ++i) tasks_.push_back(load_task(names_[i], int(i), ctx_.cache, c_));
    const fs::path own = ctx_.folder.file("tokenizer.model");
    if (ctx_.from_checkpoint) tok_.emplace(data::SentencePieceTokenizer::load(own));
    else start_from_pretrained(own);
    check_vocabulary(*tok_, end_, own);
    for (auto& t : tasks_)
      for (auto* set : {&t.train, &t.validation, &t.test}) tokenize(*set);
    for (const auto& t : tasks_) {
      train_.insert(train_.end(), t.train.begin(), t.train.end());
      // Validation loss on up to 500 examples of each task.
      val_.insert(val_.end(), t.validation.begin(), t.validation.begin() + std::ptrdiff_t(std::min<std::size_t>(500, t.validation.size())));
    }
    order_ = data::EpochOrder(train_.size(), data_seed(c_), 15);
    if (ctx_.command != "train") return;
    std::printf("ctgrad finetune t5: %s, size %s, %s, %lld parameters, %d threads\n", c_.text("task").c_str(), c_.text("size").c_str(),
                c_.text("init") == "scratch" ? "from scratch" : ("from " + c_.text("pretrained")).c_str(), (long long)model_.parameter_count(),
                model_.threads());
    for (const auto& t : tasks_)
      std::printf("  %-16s %6zu train (%4.1f%% of the stream) / %5zu validation / %5zu test examples\n", t.name.c_str(), t.train.size(),
                  100.0 * double(t.train.size()) / double(train_.size()), t.validation.size(), t.test.size());
    std::printf("%s, batch %lld, %lld steps\n", describe_optimizer(with_default_lr(c_), 0).c_str(), (long long)batch_, (long long)c_.integer("steps"));
  }

  checkpoint::Metadata metadata() override { return tokenizer_metadata(ctx_.folder); }

  std::vector<std::string> metrics() const override { return {"loss"}; }
  training::LoopOptions loop() override {
    return step_loop(c_, schedule(with_default_lr(c_), 0), "nats/token", "examples");
  }

  training::Run run() override {
    return {.model = model_,
            .optimizer = *opt_,
            .feed =
                [this](std::int64_t step) {
                  // This rank's rows of the step's batch (all of them in one process).
                  // Padded to the whole batch's longest, so that each rank's dropout masks are those of its rows in one process.
                  const std::vector<std::size_t> rows = order_.batch_rows(step, batch_);
                  set_batch(train_, {rows.begin() + ctx_.shard.begin(batch_), rows.begin() + ctx_.shard.end(batch_)}, rows);
                  shard_targets_ = std::count_if(tgt_out_.begin(), tgt_out_.end(), [](std::int32_t t) { return t != kPad; });
                  return double(ctx_.shard.rows(batch_));
                },
            .validate = [this] { return training::Metrics{{{"loss", validation_loss(true)}}}; },
            .loss_terms = [this] { return double(shard_targets_); }};
  }

  int after_training(const training::Outcome&) override { return eval(c_); }

  // Per task, on its test examples: BLEU (greedy, beam) or the accuracy of the decoded label.
  int eval(const Config&) override {
    const auto search = t5_search(P, model_.parameters(), ctx_.threads);
    models::TranslationSearch& tr = *search;
    const models::BeamOptions beam{.beam = int(c_.integer("beam")), .alpha = c_.real("alpha"), .max_len = int(target_len_), .stop = training::interrupted};
    std::printf("validation loss %.4f nats/token\n", validation_loss(false));
    for (const auto& t : tasks_) {
      const std::size_t n = c_.integer("eval_examples") > 0 ? std::min<std::size_t>(t.test.size(), std::size_t(c_.integer("eval_examples"))) : t.test.size();
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::string> refs, greedy, beamed;
      for (std::size_t i = 0; i < n && !training::interrupted(); ++i) {
        refs.push_back(t.test[i].target_text);
        greedy.push_back(decode(*tok_, tr.greedy(t.test[i].input, kPad, kEos, int(target_len_)), end_));
        if (!t.classification) beamed.push_back(decode(*tok_, tr.search(t.test[i].input, kPad, kEos, beam), end_));
      }
      if (training::interrupted()) return 130;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (t.classification) {
        std::size_t right = 0, other = 0;
        for (std::size_t i = 0; i < n; ++i) {
          right += greedy[i] == refs[i];
          other += std::find(t.labels.begin(), t.labels.end(), greedy[i]) == t.labels.end();
        }
        std::printf("%s: accuracy %.4f on %zu test examples (majority class %.4f; %zu answers not a label; greedy, %.1f s)\n", t.name.c_str(),
                    double(right) / double(std::max<std::size_t>(n, 1)), n, t.majority, other, secs);
      } else {
        std::printf("%s: %zu test sentences, greedy %s; beam %d: %s (%.1f s)\n", t.name.c_str(), n, metrics::corpus_bleu(greedy, refs).str().c_str(),
                    beam.beam, metrics::corpus_bleu(beamed, refs).str().c_str(), secs);
        for (std::size_t i = 0; i < std::min<std::size_t>(n, 3); ++i)
          std::printf("    %s\n    ref  %s\n    beam %s\n", t.test[i].source_text.c_str(), refs[i].c_str(), beamed[i].c_str());
      }
    }
    return 0;
  }

 private:
  // The optimizer's rate when lr is 0: Adafactor at a constant 0.01 (T5 fine-tunes at 0.001 for
  // 262k steps; over our 1000, 0.01 gets far lower losses: docs/models/t5.md), or AdamW at 3e-4.
  static Config with_default_lr(Config c) {
    if (c.real("lr") == 0) c.set("lr", c.text("optimizer") == "adafactor" ? "0.01" : "0.0003", "the fine-tuning default");
    return c;
  }
  void start_from_pretrained(const fs::path& own) {
    if (!ctx_.pretrained.empty()) {  // --from DIR: the folder's SentencePiece model (its weights are the driver's to load)
      if (c_.text("init") == "scratch") throw config_error("init=scratch starts from T5's random init; --from loads the folder's weights: give one");
      try {
        tok_.emplace(data::SentencePieceTokenizer::load(folder_tokenizer(ctx_.pretrained)));
      } catch (const data::data_error& e) {
        throw config_error(message_of(e));
      }
      check_vocabulary(*tok_, end_, folder_tokenizer(ctx_.pretrained));
      if (ctx_.command == "train") tok_->save(own);
      return;
    }
    const PretrainedRun from = open_pretrained(c_.text("pretrained"), "t5", "ctgrad train t5 --run");
    if (!from.config_json.empty()) {
      const auto t5 = std::find_if(cli::tasks().begin(), cli::tasks().end(), [](const Task& t) { return t.name == "t5"; });
      if (t5 == cli::tasks().end()) throw std::logic_error("the t5 task is not registered");
      Config pre(t5->schema);
      pre.merge_json(from.config_json, "the config in " + (from.dir / "checkpoint.safetensors").string());
      std::string sets;  // each model key that differs, with its --set
      for (const char* key : {"size", "tied", "d_model", "layers", "dec_layers", "heads", "d_ff", "vocab", "ffn", "buckets", "max_distance", "sentinel_end"})
        if (pre.show(key) != c_.show(key)) sets += std::string(sets.empty() ? "" : " ") + "--set " + key + "=" + pre.show(key);
      if (!sets.empty()) throw config_error("pretrained " + from.dir.string() + " was trained with another model: " + sets);
    }
    tok_.emplace(data::SentencePieceTokenizer::load(from.tokenizer));
    if (c_.text("init") == "scratch") return from.copy_tokenizer(own);
    const int copied = from.load_weights(model_, [](std::string_view) { return true; }, "this model's");
    from.copy_tokenizer(own);
    std::printf("loaded all %d tensors from %s\n", copied, (from.dir / "checkpoint.safetensors").c_str());
  }

  void tokenize(std::vector<Example>& set) {
    std::vector<std::string> inputs(set.size()), targets(set.size());
    for (std::size_t i = 0; i < set.size(); ++i) inputs[i] = std::move(set[i].input_text), targets[i] = set[i].target_text;
    std::vector<std::vector<std::int32_t>> in, out;
    model_.execute([&] { in = tok_->encode_all(inputs, ctx_.cache), out = tok_->encode_all(targets, ctx_.cache); });
    for (std::size_t i = 0; i < set.size(); ++i) {
      Example& e = set[i];
      e.input = std::move(in[i]), e.target = std::move(out[i]);
      e.input.resize(std::min<std::size_t>(e.input.size(), std::size_t(context_ - 1)));
      e.target.resize(std::min<std::size_t>(e.target.size(), std::size_t(target_len_ - 1)));
      e.input.push_back(kEos), e.target.push_back(kEos);
    }
  }

  // The examples `rows`, padded to the longest of `padded_to` (of rows when empty).
  void set_batch(const std::vector<Example>& set, const std::vector<std::size_t>& rows, const std::vector<std::size_t>& padded_to = {}) {
    std::int64_t S = 0, T = 0;
    for (std::size_t r : padded_to.empty() ? rows : padded_to) S = std::max<std::int64_t>(S, std::int64_t(set[r].input.size())), T = std::max<std::int64_t>(T, std::int64_t(set[r].target.size()));
    const std::int64_t b = std::int64_t(rows.size());
    src_.assign(std::size_t(b * S), kPad), tgt_in_.assign(std::size_t(b * T), kPad), tgt_out_.assign(std::size_t(b * T), kPad), src_len_.clear();
    for (std::int64_t j = 0; j < b; ++j) {
      const Example& e = set[rows[std::size_t(j)]];
      std::copy(e.input.begin(), e.input.end(), src_.begin() + j * S);
      std::copy(e.target.begin(), e.target.end(), tgt_out_.begin() + j * T);
      std::copy(e.target.begin(), e.target.end() - 1, tgt_in_.begin() + j * T + 1);  // after the start (pad)
      src_len_.push_back(std::int32_t(e.input.size()));
    }
    model_.set_input(in::src, std::span<const std::int32_t>(src_), {b, S});
    model_.set_input(in::src_len, std::span<const std::int32_t>(src_len_), {b});
    model_.set_input(in::tgt_in, std::span<const std::int32_t>(tgt_in_), {b, T});
    model_.set_input(in::tgt_out, std::span<const std::int32_t>(tgt_out_), {b, T});
  }

  // Per target token, from the logits (no label smoothing), over the validation examples; in
  // training, the ranks take turns at the batches (after it, rank 0 evaluates alone).
  double validation_loss(bool in_training) {
    double loss = 0;
    std::int64_t n = 0;
    const EvalShard shard{in_training ? ctx_.comm : nullptr};
    for (std::size_t first = 0; first < val_.size() && !training::interrupted(); first += std::size_t(batch_)) {
      if (!shard.mine(std::int64_t(first) / batch_)) continue;
      std::vector<std::size_t> rows(std::min(std::size_t(batch_), val_.size() - first));
      std::iota(rows.begin(), rows.end(), first);
      set_batch(val_, rows);
      model_.forward(Mode::infer);
      const auto logits = model_.output("logits");
      for (std::size_t k = 0; k < tgt_out_.size(); ++k) {
        if (tgt_out_[k] == kPad) continue;
        loss += token_nll(logits.data + std::int64_t(k) * P.vocab, P.vocab, tgt_out_[k]);
        ++n;
      }
    }
    double sums[2] = {loss, double(n)};
    shard.sum(sums);
    return sums[0] / std::max(sums[1], 1.0);
  }

  models::T5Config P;
  int end_;  // the sentinels end here
  Config c_;
  Context ctx_;
  std::shared_ptr<const PlannedGraph> planned_;
  std::vector<std::string> names_;
  Program<run_time> model_;
  std::unique_ptr<optim::Optimizer<float>> opt_;
  std::int64_t context_, target_len_, batch_;
  std::int64_t shard_targets_ = 0;  // this rank's scored target tokens of the step
  std::optional<data::SentencePieceTokenizer> tok_;
  std::vector<TaskSet> tasks_;
  std::vector<Example> train_, val_;
  data::EpochOrder order_;  // the training examples, epoch by epoch
  std::vector<std::int32_t> src_, src_len_, tgt_in_, tgt_out_;
};

Task finetune_task() {
  Task t;
  t.name = "t5-finetune";
  t.data_parallel = true;
  t.summary = "T5 fine-tuned text to text (ctgrad finetune t5 --task ...): translation, Austen's novels, or a mixture";
  t.schema = finetune_schema();
  t.input_folders = {"pretrained"};
  t.open = [](const Config& c, const Context& ctx) -> std::unique_ptr<Session> { return std::make_unique<FinetuneSession>(c, ctx); };
  t.from_hf = [](const fs::path& dir, const pretrained::HfModel& m) {
    auto keys = hf_keys(dir, m);
    keys.emplace_back("pretrained", dir.string());  // what the run's config says it started from
    return keys;
  };
  t.to_hf = to_hf;
  return t;
}

const bool registered = register_task(finetune_task());

}  // namespace
}  // namespace ctgrad::cli
