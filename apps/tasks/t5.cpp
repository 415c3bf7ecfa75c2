// ctgrad train|eval|sample|finetune t5: T5 pretrained by span corruption on the KJV Bible and Jane
// Austen's novels (docs/models/t5.md), d2l's chapter on large-scale pretraining: one SentencePiece
// vocabulary (pad 0, </s> 1, <unk> 2, then the pieces; 100 sentinels at the end of the model's
// vocabulary), sequences packed from whole verses and paragraphs, Raffel et al.'s objective with
// spans placed without position bias (data/span_corruption.hpp), Adafactor with T5's inverse-
// square-root schedule. Fine-tuning text to text is apps/tasks/t5_finetune.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>

#include <ctgrad/data/mlm.hpp>  // (pack_units)
#include <ctgrad/data/span_corruption.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/models/t5.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "../output_file.hpp"
#include "../task.hpp"
#include "t5_common.hpp"
#include "text_corpus.hpp"

namespace ctgrad::cli {
namespace {

using namespace t5;

Schema t5_schema() {
  Schema s;
  add_model_keys(s);
  s.integer("context", 64, {.min = 8, .max = 1 << 16}, "input tokens per sequence after corruption (</s> included): sets how many raw tokens a sequence holds", Role::run)
      .integer("batch", 32, {.min = 1, .max = 1 << 14}, "sequences per step", Role::run)
      .integer("steps", 2000, {.min = 1, .max = std::int64_t(1) << 40}, "training steps")
      .real("noise_density", 0.15, {.min = 0, .max = 0.95, .min_open = true}, "fraction of a sequence's tokens corrupted")
      .real("mean_span", 3.0, {.min = 1, .max = 1e6}, "mean length of a corrupted span")
      .integer("eval_every", 250, {.min = 1}, "steps between validations and checkpoints")
      .integer("eval_sequences", 512, {.min = 0}, "validation sequences, evenly spaced over the held-out text (0: all)");
  add_optimizer_keys(s, {.lr_help = "0: the optimizer's default (Adafactor: 0.01, scaled by each weight's RMS; AdamW: 1e-3 peak)"});
  corpus::add_corpus_keys(s);
  add_common_keys(s);
  add_hyper_keys(s, hyper_graph(), {{"dropout", 0.0}});  // T5 v1.1 pretrains without dropout
  return s;
}

Schema sample_options() {
  Schema s;
  s.text("fill", "In the beginning <extra_id_0> the heaven and the earth.", "text with sentinels <extra_id_0>, <extra_id_1>, ... in order")
      .integer("beam", 4, {.min = 1, .max = 1000}, "beam width (1: greedy)")
      .integer("max-len", 32, {.min = 1, .max = 1 << 12}, "generated tokens at most");
  return s;
}

class T5Session : public Session {
 public:
  T5Session(const Config& c, const Context& ctx)
      : P(t5_config(c)), end_(sentinel_end(c)), c_(c), ctx_(ctx), planned_(plan_model([this] { return models::t5(P); })), model_(planned_, program_options(c, ctx.threads, planned_->graph())), opt_(make_optimizer(c, model_)), batch_(c.integer("batch")),
        span_({.noise_density = c.real("noise_density"), .mean_span = c.real("mean_span")}) {
    try {
      lengths_ = data::span_corruption_lengths(c.integer("context"), span_);
    } catch (const std::invalid_argument& e) {
      throw config_error(std::string("context ") + c.show("context") + ": " + e.what());
    }
    // A sequence's spans (one more when the cut splits one) must not outnumber the sentinels.
    if (const std::int64_t spans = data::span_counts(lengths_.tokens, span_).spans + 1; spans > models::kT5Sentinels) {
      std::int64_t fits = c.integer("context");
      while (fits > 8 && data::span_counts(data::span_corruption_lengths(fits, span_).tokens, span_).spans + 1 > models::kT5Sentinels) --fits;
      throw config_error("context " + c.show("context") + " packs sequences of " + std::to_string(lengths_.tokens) + " tokens with up to " +
                         std::to_string(spans) + " spans, more than the " + std::to_string(models::kT5Sentinels) +
                         " sentinels: at most --set context=" + std::to_string(fits) + " (or a longer mean_span)");
    }
    check_fits(model_, {batch_, lengths_.targets, lengths_.inputs, 1, 1, 1}, 16.0 * double(batch_) * double(lengths_.inputs + lengths_.targets),
               "batch " + c.show("batch") + " x context " + c.show("context"));
    check_shards(ctx, batch_, "batch");
  }
  Executor<float>& model() override { return model_; }
  optim::Optimizer<float>& optimizer() override { return *opt_; }

  void prepare() override {
    const fs::path tok_file = ctx_.folder.file("tokenizer.model");
    corpus::Corpus text;
    if (!ctx_.pretrained.empty()) {  // the model folder's SentencePiece model becomes the run's
      const fs::path source = folder_tokenizer(ctx_.pretrained);
      try {
        tok_.emplace(data::SentencePieceTokenizer::load(source));
      } catch (const data::data_error& e) {
        throw config_error(message_of(e));
      }
      vocab_ = check_vocabulary(*tok_, end_, source);
    } else if (ctx_.from_checkpoint) {
      tok_.emplace(data::SentencePieceTokenizer::load(tok_file));
    } else {
      text = corpus::corpus_of(c_, ctx_.cache);
      tok_.emplace(train_tokenizer(text, ctx_.folder.file("tokenizer"), end_ - models::kT5Sentinels, data_seed(c_), ctx_.cache));
    }
    vocab_ = check_vocabulary(*tok_, end_, tok_file);
    if (ctx_.command == "sample") return;
    if (text.train.empty()) text = corpus::corpus_of(c_, ctx_.cache);
    // Units packed whole into sequences of at most `tokens` raw tokens, document by document.
    auto sequences = [&](const std::vector<std::string>& units, const std::vector<std::size_t>& docs) {
      std::vector<std::vector<std::int32_t>> out, all;
      model_.execute([&] { all = tok_->encode_all(units, ctx_.cache); });
      for (std::size_t d = 0; d < docs.size(); ++d) {
        std::vector<std::vector<std::int32_t>> ids;
        for (std::size_t u = docs[d]; u < (d + 1 < docs.size() ? docs[d + 1] : units.size()); ++u) ids.push_back(std::move(all[u]));
        for (auto& s : data::pack_units(ids, std::size_t(lengths_.tokens)))
          if (s.size() >= 2) out.push_back(std::move(s));
      }
      return out;
    };
    val_seqs_ = sequences(text.validation, text.validation_docs);
    if (const std::int64_t n = c_.integer("eval_sequences"); n > 0 && n < std::int64_t(val_seqs_.size())) {
      std::vector<std::vector<std::int32_t>> kept;  // evenly spaced: every document is in
      for (std::int64_t i = 0; i < n; ++i) kept.push_back(val_seqs_[std::size_t(double(i) * double(val_seqs_.size()) / double(n))]);
      val_seqs_ = std::move(kept);
    }
    const data::SpanCorruptionBatches::Ids ids{.pad = kPad, .eos = kEos, .first_sentinel = std::int32_t(end_ - 1)};
    val_.emplace(val_seqs_, ids, span_, batch_, data_seed(c_));
    if (ctx_.command != "train" && ctx_.command != "export-batches") return;
    train_seqs_ = sequences(text.train, text.train_docs);
    train_.emplace(train_seqs_, ids, span_, batch_, data_seed(c_));
    if (ctx_.command != "train") return;
    if (!ctx_.pretrained.empty()) tok_->save(tok_file);  // the folder's SentencePiece model becomes the run's, once its data is read
    std::int64_t tokens = 0;
    for (const auto& s : train_seqs_) tokens += std::int64_t(s.size());
    std::printf("ctgrad train t5: size %s (%d+%d layers, %d heads, d_model %d, d_ff %d, %s output), %lld parameters, %d threads\n",
                c_.text("size").c_str(), P.n_layer, P.n_dec_layer, P.heads, P.d_model, P.d_ff, P.tied ? "tied" : "untied",
                (long long)model_.parameter_count(), model_.threads());
    std::printf("KJV + Austen: %zu train / %zu validation units -> %zu / %zu sequences of <= %lld tokens (%lld train tokens); SentencePiece "
                "with %d pieces + %d sentinels; span corruption: noise %.2f, mean span %.1f -> inputs <= %lld, targets <= %lld tokens\n",
                text.train.size(), text.validation.size(), train_seqs_.size(), val_seqs_.size(), (long long)lengths_.tokens, (long long)tokens,
                vocab_, models::kT5Sentinels, span_.noise_density, span_.mean_span, (long long)lengths_.inputs, (long long)lengths_.targets);
    std::printf("%s, batch %lld, %lld steps\n", describe_optimizer(c_, 10000).c_str(), (long long)batch_, (long long)c_.integer("steps"));
    baseline_ = unigram_baseline();
    std::printf("unigram baseline on the validation targets: loss %.4f nats/token, accuracy %.4f\n", baseline_.loss, baseline_.accuracy);
  }

  checkpoint::Metadata metadata() override { return tokenizer_metadata(ctx_.folder); }

  std::vector<std::string> metrics() const override { return {"loss", "accuracy"}; }
  training::LoopOptions loop() override {
    return step_loop(c_, schedule(c_, 10000), "nats/token", "tok");
  }

  training::Run run() override {
    return {.model = model_,
            .optimizer = *opt_,
            .feed =
                [this](std::int64_t step) {
                  // This rank's rows of the step's batch (all of them in one process).
                  train_->draw(std::uint64_t(step));
                  const std::int64_t r0 = ctx_.shard.begin(batch_), r1 = ctx_.shard.end(batch_);
                  set_batch(*train_, r0, r1);
                  const auto a = train_->input_lengths().subspan(std::size_t(r0), std::size_t(r1 - r0));
                  const auto b = train_->target_lengths().subspan(std::size_t(r0), std::size_t(r1 - r0));
                  shard_targets_ = 0;
                  for (std::int32_t t : train_->targets().subspan(std::size_t(r0 * train_->target_length()), std::size_t((r1 - r0) * train_->target_length())))
                    shard_targets_ += t != kPad;
                  return double(std::accumulate(a.begin(), a.end(), std::int64_t(0)) + std::accumulate(b.begin(), b.end(), std::int64_t(0)));
                },
            .validate = [this] {
              const Scores v = validate();
              return training::Metrics{{{"loss", v.loss}, {"accuracy", v.accuracy}}};
            },
            .loss_terms = [this] { return double(shard_targets_); }};
  }

  int eval(const Config&) override {
    const Stopwatch time;
    const Scores v = validate();
    if (training::interrupted()) return 130;
    if (!std::isfinite(v.loss)) throw std::runtime_error("the validation loss is not finite: the checkpoint's model is broken");
    std::printf("validation: loss %.4f nats/target token, target-token accuracy %.4f (%zu sequences, %.1f s)\n", v.loss, v.accuracy,
                val_seqs_.size(), time.seconds());
    return 0;
  }

  int after_training(const training::Outcome& out) override {
    for (const auto& [name, value] : out.last_validation.values)
      if (name == "loss") std::printf("validation loss %.4f nats/target token (unigram baseline %.4f)\n", value, baseline_.loss);
    return fill(sample_options().defaults());
  }

  int command(const std::string& name, const Config& o) override {
    if (name == "sample") return fill(o);
    if (name == "export-batches") return export_batches(o);
    return Session::command(name, o);
  }

 private:
  struct Scores {
    double loss = 0, accuracy = 0;
  };

  // Rows [r0, r1) of the batch (all of it by default).
  void set_batch(const data::SpanCorruptionBatches& b, std::int64_t r0 = 0, std::int64_t r1 = -1) {
    if (r1 < 0) r1 = b.batch();
    const std::int64_t rows = r1 - r0, S = b.input_length(), T = b.target_length();
    auto part = [&](std::span<const std::int32_t> v, std::int64_t width) { return v.subspan(std::size_t(r0 * width), std::size_t(rows * width)); };
    model_.set_input(in::src, part(b.inputs(), S), {rows, S});
    model_.set_input(in::src_len, part(b.input_lengths(), 1), {rows});
    model_.set_input(in::tgt_in, part(b.decoder_inputs(), T), {rows, T});
    model_.set_input(in::tgt_out, part(b.targets(), T), {rows, T});
  }

  // Loss per target token (sentinels, corrupted tokens and </s>; from the logits, so without label
  // smoothing) and the accuracy of teacher-forced next-token prediction, on fixed masks.
  Scores validate() {
    Scores s;
    std::int64_t n = 0, right = 0;
    const EvalShard shard{ctx_.comm};  // the ranks take turns at the batches
    for (std::int64_t first = 0; first < std::int64_t(val_seqs_.size()) && !training::interrupted(); first += batch_) {
      if (!shard.mine(first / batch_)) continue;
      val_->rows(first, std::min<std::int64_t>(batch_, std::int64_t(val_seqs_.size()) - first));
      set_batch(*val_);
      model_.forward(Mode::infer);
      const auto logits = model_.output("logits");  // [rows, T, vocab]
      const auto targets = val_->targets();
      for (std::size_t k = 0; k < targets.size(); ++k) {
        if (targets[k] == kPad) continue;
        const float* row = logits.data + std::int64_t(k) * P.vocab;
        s.loss += token_nll(row, P.vocab, targets[k]);
        right += std::max_element(row, row + P.vocab) - row == targets[k];
        ++n;
      }
    }
    double sums[3] = {s.loss, double(n), double(right)};
    shard.sum(sums);
    s.loss = sums[0] / std::max(sums[1], 1.0);
    s.accuracy = sums[2] / std::max(sums[1], 1.0);
    return s;
  }

  // Every target token predicted from the frequencies of target tokens in 200 training batches
  // (add-one smoothed): what a model that ignores the input and the target's left context gets.
  Scores unigram_baseline() {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(P.vocab), 1);
    std::int64_t total = P.vocab;
    for (std::uint64_t step = 1; step <= 200; ++step) {
      train_->draw(~step);  // batches the run never trains on
      for (std::int32_t t : train_->targets())
        if (t != kPad) ++counts[std::size_t(t)], ++total;
    }
    const std::int32_t best = std::int32_t(std::max_element(counts.begin(), counts.end()) - counts.begin());
    Scores s;
    std::int64_t n = 0, right = 0;
    for (std::int64_t first = 0; first < std::int64_t(val_seqs_.size()); first += batch_) {
      val_->rows(first, std::min<std::int64_t>(batch_, std::int64_t(val_seqs_.size()) - first));
      for (std::int32_t t : val_->targets()) {
        if (t == kPad) continue;
        s.loss -= std::log(double(counts[std::size_t(t)]) / double(total));
        right += t == best, ++n;
      }
    }
    s.loss /= double(std::max<std::int64_t>(n, 1));
    s.accuracy = double(right) / double(std::max<std::int64_t>(n, 1));
    return s;
  }

  // ctgrad sample t5 --fill "text with <extra_id_0> ...": the spans the model writes for the
  // sentinels (greedy and beam), and the text with them in place.
  int fill(const Config& o) {
    const std::vector<std::int32_t> src = encode_with_sentinels(*tok_, o.text("fill"), end_, /*need_sentinel=*/true);
    // The encoder reads at most what it was trained on (and its cost grows with the square).
    if (std::int64_t(src.size()) > c_.integer("context"))
      throw config_error("--fill is " + std::to_string(src.size()) + " tokens, longer than the context of " + c_.show("context") +
                         " the model was trained at: give a shorter text");
    const auto search = t5_search(P, model_.parameters(), ctx_.threads);
    models::TranslationSearch& tr = *search;
    const int beam = int(o.integer("beam")), max_len = int(o.integer("max-len"));
    std::printf("fill: %s\n", o.text("fill").c_str());
    for (const int b : beam > 1 ? std::vector<int>{1, beam} : std::vector<int>{1}) {
      const auto out = tr.search(src, kPad, kEos, models::BeamOptions{.beam = b, .alpha = 0.6, .max_len = max_len, .stop = training::interrupted});
      if (training::interrupted()) return 130;
      const Filled f = fill_sentinels(*tok_, o.text("fill"), out, end_);
      std::printf("  %-7s %s\n          -> %s\n", b == 1 ? "greedy" : ("beam " + std::to_string(b)).c_str(), f.spans.c_str(), f.text.c_str());
    }
    return 0;
  }

  int export_batches(const Config& o) {
    check_output_file(o.text("out"), "--out", o.flag("overwrite"), ctx_.folder);
    return export_span_batches(o, c_, *train_, *val_, std::int64_t(val_seqs_.size()), batch_, lengths_, P.vocab);
  }

  models::T5Config P;
  int end_;  // the sentinels end here
  Config c_;
  Context ctx_;
  std::shared_ptr<const PlannedGraph> planned_;
  Program<run_time> model_;
  std::unique_ptr<optim::Optimizer<float>> opt_;
  std::int64_t batch_;
  std::int64_t shard_targets_ = 0;  // this rank's scored target tokens of the step
  data::SpanCorruptionOptions span_;
  data::SpanLengths lengths_;
  std::optional<data::SentencePieceTokenizer> tok_;
  std::int32_t vocab_ = 0;
  std::vector<std::vector<std::int32_t>> train_seqs_, val_seqs_;
  std::optional<data::SpanCorruptionBatches> train_, val_;
  Scores baseline_;
};

Task t5_task() {
  Task t;
  t.name = "t5";
  t.data_parallel = true;
  t.summary = "encoder-decoder T5 (v1.1) pretrained by span corruption on the KJV Bible and Jane Austen or your text (--set data=PATH), span filling";
  t.input_folders = {"data", "val_data"};
  t.schema = t5_schema();
  t.commands.push_back({"sample", "the spans a pretrained T5 writes for the sentinels of a text (greedy and beam)", sample_options()});
  Schema exp;
  exp.integer("steps", 2000, {.min = 1, .max = 1 << 20}, "training steps to export").text("out", "t5_batches.safetensors", "the file to write").flag("overwrite", false, "replace an existing --out file");
  t.commands.push_back({"export-batches", "the run's training batches (steps 1..N) and validation batches, for another framework", exp});
  t.training_commands.push_back({"finetune", "t5-finetune",
                                 "text to text from the pretrained run (--pretrained DIR): --task translate-en-de, translate-de-en, austen-novel "
                                 "or a mixture mix:a,b,...",
                                 {"task", "pretrained", "init"}});
  t.open = [](const Config& c, const Context& ctx) -> std::unique_ptr<Session> {
    return std::make_unique<T5Session>(c, ctx);
  };
  t.from_hf = hf_keys;
  t.to_hf = to_hf;
  return t;
}

const bool registered = register_task(t5_task());

}  // namespace
}  // namespace ctgrad::cli
