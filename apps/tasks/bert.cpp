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

#include "../output_file.hpp"
#include "../task.hpp"
#include "bert_data.hpp"

namespace ctgrad::cli {
namespace {

namespace in = models::bert_inputs;
namespace fs = std::filesystem;
using training::Role;

template <models::BertConfig P>
struct Bert {
  static constexpr auto mlm = freeze<models::bert_mlm<P>>();
};

using bert::kSpecials;

Schema bert_schema() {
  Schema s;
  s.choice("size", "small", {"tiny", "small", "base"}, "preset: tiny (tests), small (minutes here), base (BERT-base's shape)", Role::model)
      .integer("context", 64, {.min = 8, .max = 1 << 16}, "tokens per sequence, [CLS] and [SEP] included (at most the preset's)", Role::run)
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
      .flag("pre_norm", false, "pre-norm encoder layers and a final norm (off: post-norm, as the paper)", Role::model)
      .integer("eval_every", 250, {.min = 1}, "steps between validations and checkpoints")
      .integer("eval_sequences", 512, {.min = 0}, "validation sequences, evenly spaced over the held-out text (0: all)");
  add_common_keys(s);
  add_hyper_keys(s, Bert<models::kBertSmall>::mlm);
  return s;
}

Schema fill_mask_options() {
  Schema s;
  s.text("text", "And God said, Let there be [MASK].", "text with one or more [MASK]").integer("top-k", 5, {.min = 1, .max = 1000}, "candidates per mask");
  return s;
}

using corpus::Corpus;
using corpus::load_corpus;

template <models::BertConfig P>
class BertSession : public Session {
  static constexpr const auto& G = Bert<P>::mlm;

 public:
  BertSession(const Config& c, const Context& ctx)
      : c_(c), ctx_(ctx), model_(program_options(c, ctx.threads, G)),
        opt_(model_.parameters(), optim::AdamOptions{.lr = c.real("lr"), .weight_decay = c.real("weight_decay")}, {optim::no_decay_group()}),
        context_(c.integer("context")), batch_(c.integer("batch")) {
    if (context_ > P.context)
      throw config_error("context " + std::to_string(context_) + " is longer than size " + c.text("size") + "'s " + std::to_string(P.context));
    if (c.real("to_mask") + c.real("to_random") > 1)
      throw config_error("to_mask " + c.show("to_mask") + " + to_random " + c.show("to_random") + " is more than 1");
    const std::int64_t picks = batch_ * std::max<std::int64_t>(1, std::llround(c.real("select") * double(context_)));
    check_fits(model_, {batch_, context_, 1, picks, 1, 1}, 24.0 * double(batch_) * double(context_),
               "batch " + c.show("batch") + " x context " + c.show("context"));
    check_shards(ctx, batch_, "batch");
    if (P.next_sentence && ctx.shard.count > 1)  // its two losses average over different counts: no one weight per rank
      throw config_error("next_sentence=true does not train data-parallel yet: start it without mpirun");
  }
  Executor<float>& model() override { return model_; }
  optim::Optimizer<float>& optimizer() override { return opt_; }

  void prepare() override {
    const fs::path tok_file = ctx_.folder.file("tokenizer.model");
    Corpus corpus;
    if (ctx_.from_checkpoint) {
      tok_.emplace(data::SentencePieceTokenizer::load(tok_file));
    } else {
      corpus = load_corpus(ctx_.cache);
      std::string text;
      for (const auto& u : corpus.train) text += u + "\n";
      tok_.emplace(data::SentencePieceTokenizer::train(text, ctx_.folder.file("tokenizer"),
                                                       {.vocab_size = P.vocab, .model_type = "bpe", .seed = data_seed(c_), .unk_id = 1,
                                                        .bos_id = -1, .eos_id = -1, .pad_id = 0, .unk_piece = "[UNK]", .pad_piece = "[PAD]",
                                                        .user_defined_symbols = {"[CLS]", "[SEP]", "[MASK]"}},
                                                       ctx_.cache));
    }
    vocab_ = tok_->vocab_size();
    if (vocab_ > P.vocab)
      throw config_error("the tokenizer has " + std::to_string(vocab_) + " tokens, more than size " + c_.text("size") + "'s " + std::to_string(P.vocab));
    if (tok_->piece(kSpecials.mask) != "[MASK]" || tok_->piece(kSpecials.cls) != "[CLS]" || tok_->piece(kSpecials.pad) != "[PAD]")
      throw config_error(tok_file.string() + " is not a BERT vocabulary ([PAD] [UNK] [CLS] [SEP] [MASK] first)");
    specials_ = kSpecials;
    specials_.vocab = vocab_;
    if (ctx_.command == "fill-mask") return;
    if (corpus.train.empty()) corpus = load_corpus(ctx_.cache);
    word_starts_.assign(std::size_t(vocab_), 0);
    for (std::int32_t id = 0; id < vocab_; ++id) word_starts_[std::size_t(id)] = tok_->starts_word(id);
    // Units packed whole into sequences, document by document; with next-sentence prediction each
    // sequence is half a row, and has_next says whether the following one continues its document.
    auto sequences = [&](const std::vector<std::string>& units, const std::vector<std::size_t>& docs, std::vector<std::int64_t>& counts,
                         std::vector<std::uint8_t>& has_next) {
      std::vector<std::vector<std::int32_t>> out, all;
      model_.execute([&] { all = tok_->encode_all(units, ctx_.cache); });
      const std::size_t max_tokens = P.next_sentence ? std::size_t(context_ - 3) / 2 : std::size_t(context_ - 2);
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
      const std::int64_t group = P.next_sentence ? 2 : 1, n = std::max<std::int64_t>(P.next_sentence ? 2 : 1, n_val / group);
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
    if constexpr (P.next_sentence) val_->next_sentence(val_next);
    if (ctx_.command != "train" && ctx_.command != "export-batches") return;
    train_seqs_ = sequences(corpus.train, corpus.train_docs, train_counts, train_next);
    train_.emplace(train_seqs_, specials_, masking, batch_, data_seed(c_), word_starts_);
    if constexpr (P.next_sentence) train_->next_sentence(train_next);
    if (ctx_.command != "train") return;
    unigram_ = train_counts;
    std::int64_t tokens = 0;
    for (const auto& s : train_seqs_) tokens += std::int64_t(s.size());
    std::printf("ctgrad train bert: size %s (%d layers, %d heads, d_model %d, d_ff %d), %lld parameters, %d threads\n", c_.text("size").c_str(),
                P.n_layer, P.heads, P.d_model, P.d_ff, (long long)model_.parameter_count(), model_.threads());
    std::printf("KJV + Austen: %zu train / %zu validation units -> %zu / %zu sequences of <= %lld tokens%s (%lld train tokens); "
                "SentencePiece BPE with %d tokens; batch %lld, %lld steps, %s masking\n",
                corpus.train.size(), corpus.validation.size(), train_seqs_.size(), val_seqs_.size(),
                (long long)(P.next_sentence ? (context_ - 3) / 2 : context_ - 2), P.next_sentence ? ", two to a row (next-sentence pairs)" : "",
                (long long)tokens, vocab_, (long long)batch_, (long long)c_.integer("steps"), c_.flag("whole_word") ? "whole-word" : "token");
    const Baseline b = unigram_baseline();
    std::printf("unigram baseline on the validation masks: loss %.4f nats/token, accuracy %.4f (always '%s')\n", b.loss, b.accuracy,
                tok_->piece(b.most_frequent).c_str());
  }

  checkpoint::Metadata metadata() override { return tokenizer_metadata(ctx_.folder); }

  std::vector<std::string> metrics() const override {
    std::vector<std::string> m{"loss", "accuracy"};
    if constexpr (P.next_sentence) m.push_back("next_sentence_accuracy");
    return m;
  }
  training::LoopOptions loop() override {
    return step_loop(c_, optim::warmup_linear(c_.real("lr"), 0.0, c_.integer("warmup"), c_.integer("steps")), "nats/token", "tok");
  }

  training::Run run() override {
    return {.model = model_,
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
              if constexpr (P.next_sentence) m.values.push_back({"next_sentence_accuracy", v.next_sentence_accuracy});
              return m;
            },
            .loss_terms = [this] { return double(shard_picks_); }};
  }

  int eval(const Config&) override {
    const auto t0 = std::chrono::steady_clock::now();
    const Scores v = validate();
    if (training::interrupted()) return 130;
    if (!std::isfinite(v.loss)) throw std::runtime_error("the validation loss is not finite: the checkpoint's model is broken");
    std::printf("validation: MLM loss %.4f nats/token, masked-token accuracy %.4f", v.loss, v.accuracy);
    if constexpr (P.next_sentence) std::printf(", next-sentence accuracy %.4f (balanced: chance is 0.5)", v.next_sentence_accuracy);
    std::printf(" (%zu sequences, %.1f s)\n", val_seqs_.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }

  // What the model learned, shown: the masked-token accuracy against the baseline, and a fill-mask.
  int after_training(const training::Outcome& out) override {
    for (const auto& [name, value] : out.last_validation.values)
      if (name == "accuracy") std::printf("masked-token accuracy %.4f (unigram baseline %.4f)\n", value, unigram_baseline().accuracy);
    return fill_mask(fill_mask_options().defaults());
  }

  int command(const std::string& name, const Config& o) override {
    if (name == "fill-mask") return fill_mask(o);
    if (name == "export-batches") return export_batches(o);
    return Session::command(name, o);
  }

 private:
  struct Baseline {
    double loss, accuracy;
    std::int32_t most_frequent;
  };
  // Predicting every masked token from the training split's token frequencies alone.
  Baseline unigram_baseline() {
    std::int64_t total = 0;
    std::int32_t best = specials_.first_regular;
    for (std::int32_t t = specials_.first_regular; t < vocab_; ++t) {
      total += unigram_[std::size_t(t)] + 1;  // add-one smoothing: no token has probability 0
      if (unigram_[std::size_t(t)] > unigram_[std::size_t(best)]) best = t;
    }
    double loss = 0;
    std::int64_t n = 0, right = 0;
    for (std::int64_t first = 0; first < std::int64_t(val_seqs_.size()); first += batch_) {
      val_->rows(first, std::min<std::int64_t>(batch_, std::int64_t(val_seqs_.size()) - first));
      for (std::int32_t t : val_->targets()) {
        loss -= std::log(double(unigram_[std::size_t(t)] + 1) / double(total));
        right += t == best, ++n;
      }
    }
    return {loss / double(std::max<std::int64_t>(n, 1)), double(right) / double(std::max<std::int64_t>(n, 1)), best};
  }

  // The batch, or a data-parallel rank's rows of it (the batch's padded length kept, so each
  // rank's dropout masks are its rows' of the whole batch) with the picks in them.
  void set_batch(const data::MlmBatches& b, training::Shard shard = {}) {
    const std::int64_t seq = b.seq(), first = shard.begin(b.batch()), rows = shard.rows(b.batch());
    const std::size_t lo = std::size_t(first * seq), n = std::size_t(rows * seq);
    shard_picks_ = 0, picks_.clear(), targets_.clear();
    for (std::size_t i = 0; i < b.picks().size(); ++i)
      if (std::size_t(b.picks()[i]) >= lo && std::size_t(b.picks()[i]) < lo + n)
        picks_.push_back(b.picks()[i] - std::int32_t(lo)), targets_.push_back(b.targets()[i]);
    shard_picks_ = std::int64_t(picks_.size());
    model_.set_input(in::ids, b.ids().subspan(lo, n), {rows, seq});
    model_.set_input(in::segments, b.segments().subspan(lo, n), {rows, seq});
    model_.set_input(in::lengths, b.lengths().subspan(std::size_t(first), std::size_t(rows)), {rows});
    model_.set_input(in::picks, std::span<const std::int32_t>(picks_), {shard_picks_});
    model_.set_input(in::targets, std::span<const std::int32_t>(targets_), {shard_picks_});
    if constexpr (P.next_sentence) model_.set_input(in::labels, b.next_labels().subspan(std::size_t(first), std::size_t(rows)), {rows});
  }
  std::vector<std::int32_t> picks_, targets_;  // of this rank's rows
  std::int64_t shard_picks_ = 0;

  struct Scores {
    double loss, accuracy, next_sentence_accuracy;
  };
  // MLM loss (per masked token) and masked-token accuracy over the validation sequences, with
  // their fixed masks (and pairs); with next-sentence prediction, its accuracy too.
  Scores validate() {
    double loss = 0;
    std::int64_t n = 0, right = 0;
    std::array<std::int64_t, 2> nsp_rows{}, nsp_right{};
    const EvalShard shard{ctx_.comm};
    for (std::int64_t first = 0; first < std::int64_t(val_seqs_.size()) && !training::interrupted(); first += batch_) {
      if (!shard.mine(first / batch_)) continue;
      val_->rows(first, std::min<std::int64_t>(batch_, std::int64_t(val_seqs_.size()) - first));
      set_batch(*val_);
      model_.forward(Mode::infer);
      const std::int64_t picks = std::int64_t(val_->picks().size());
      const auto logits = model_.output("logits");
      for (std::int64_t k = 0; k < picks; ++k) {  // -log softmax at the target (the loss may add NSP, smoothing)
        const float* row = logits.data + k * P.vocab;
        const std::int32_t target = val_->targets()[std::size_t(k)];
        loss += token_nll(row, P.vocab, target);
        right += std::max_element(row, row + vocab_) - row == target;
      }
      n += picks;
      if constexpr (P.next_sentence) {
        const auto nsp = model_.output("nsp_logits");
        for (std::int64_t b = 0; b < val_->batch(); ++b) {
          const int label = val_->next_labels()[std::size_t(b)] == 1;
          nsp_right[std::size_t(label)] += (nsp.data[2 * b + 1] > nsp.data[2 * b]) == (label == 1), ++nsp_rows[std::size_t(label)];
        }
      }
    }
    if (shard.comm) {  // the ranks' counts and sums, added (exact: whole numbers, and the loss's order is all that differs)
      double sums[7] = {loss, double(n), double(right), double(nsp_rows[0]), double(nsp_rows[1]), double(nsp_right[0]), double(nsp_right[1])};
      shard.sum(sums);
      loss = sums[0], n = std::int64_t(sums[1]), right = std::int64_t(sums[2]);
      nsp_rows = {std::int64_t(sums[3]), std::int64_t(sums[4])}, nsp_right = {std::int64_t(sums[5]), std::int64_t(sums[6])};
    }
    if (shard.comm) {  // the ranks' counts and sums, added (exact: whole numbers, and the loss's order is all that differs)
      double sums[7] = {loss, double(n), double(right), double(nsp_rows[0]), double(nsp_rows[1]), double(nsp_right[0]), double(nsp_right[1])};
      shard.sum(sums);
      loss = sums[0], n = std::int64_t(sums[1]), right = std::int64_t(sums[2]);
      nsp_rows = {std::int64_t(sums[3]), std::int64_t(sums[4])}, nsp_right = {std::int64_t(sums[5]), std::int64_t(sums[6])};
    }
    return {loss / double(std::max<std::int64_t>(n, 1)), double(right) / double(std::max<std::int64_t>(n, 1)),
            // balanced: the validation pairs are not half "next" (a kept sequence's continuation is
            // kept, the continuation's own is not), so the mean of the two classes' accuracies
            (nsp_rows[0] && nsp_rows[1]) ? 0.5 * (double(nsp_right[0]) / double(nsp_rows[0]) + double(nsp_right[1]) / double(nsp_rows[1]))
                                         : double(nsp_right[0] + nsp_right[1]) / double(std::max<std::int64_t>(nsp_rows[0] + nsp_rows[1], 1))};
  }

  // The user's text with its m-th [MASK] replaced by a piece (the others kept): a word-start piece
  // ("▁heaven") is a new word, any other ("," "s") joins the text before it.
  static std::string filled_text(const std::string& text, std::size_t m, const std::string& piece) {
    static const std::string kMask = "[MASK]", kWordStart = "\xe2\x96\x81";
    std::size_t at = text.find(kMask);
    for (std::size_t i = 0; i < m && at != std::string::npos; ++i) at = text.find(kMask, at + kMask.size());
    if (at == std::string::npos) return piece;  // the mask came from another spelling the tokenizer normalised
    std::string before = text.substr(0, at);
    const std::string after = text.substr(at + kMask.size());
    if (piece.rfind(kWordStart, 0) == 0) {
      if (!before.empty() && before.back() != ' ') before += ' ';
      return before + piece.substr(kWordStart.size()) + after;
    }
    while (!before.empty() && before.back() == ' ') before.pop_back();
    return before + piece + after;
  }

  // The Hugging Face fill-mask pipeline's output: for each [MASK], the top-k tokens with their
  // probabilities and the text with each filled in.
  int fill_mask(const Config& o) {
    std::vector<std::int32_t> ids{specials_.cls};
    try {
      // SentencePiece reads " [MASK]" as a bare word-start piece and the symbol; in training a mask
      // replaces a whole piece ("▁the"), so the bare "▁" before a mask is dropped: the model sees
      // what it was trained on, and a candidate brings its own space.
      const auto t = tok_->encode(o.text("text"));
      for (std::size_t i = 0; i < t.size(); ++i)
        if (!(i + 1 < t.size() && t[i + 1] == specials_.mask && tok_->piece(t[i]) == "\xe2\x96\x81")) ids.push_back(t[i]);
    } catch (const data::data_error& e) {
      throw config_error(std::string("--text: ") + e.what());
    }
    ids.push_back(specials_.sep);
    std::vector<std::int32_t> picks;
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == specials_.mask) picks.push_back(std::int32_t(i));
    if (picks.empty()) throw config_error("--text has no [MASK] to fill: '" + o.text("text") + "'");
    const std::int64_t seq = std::int64_t(ids.size());
    if (seq > context_)  // positions past the trained context have untrained embeddings
      throw config_error("--text is " + std::to_string(seq) + " tokens with [CLS] and [SEP], more than the model's context of " + std::to_string(context_));
    std::vector<std::int32_t> segments(ids.size(), 0), lengths{std::int32_t(seq)}, targets(picks.size(), specials_.mask);
    model_.set_input(in::ids, std::span<const std::int32_t>(ids), {1, seq});
    model_.set_input(in::segments, std::span<const std::int32_t>(segments), {1, seq});
    model_.set_input(in::lengths, std::span<const std::int32_t>(lengths), {1});
    model_.set_input(in::picks, std::span<const std::int32_t>(picks), {std::int64_t(picks.size())});
    model_.set_input(in::targets, std::span<const std::int32_t>(targets), {std::int64_t(picks.size())});
    const std::vector<std::int32_t> no_pair{0};
    if constexpr (P.next_sentence) model_.set_input(in::labels, std::span<const std::int32_t>(no_pair), {1});  // unused
    model_.forward(Mode::infer);
    const auto logits = model_.output("logits");
    const int k = int(std::min<std::int64_t>(o.integer("top-k"), vocab_ - specials_.first_regular));
    for (std::size_t m = 0; m < picks.size(); ++m) {
      const float* row = logits.data + std::int64_t(m) * P.vocab;
      const float top = *std::max_element(row, row + vocab_);
      double z = 0;
      for (std::int32_t t = 0; t < vocab_; ++t) z += std::exp(double(row[t] - top));
      std::vector<std::int32_t> order(std::size_t(vocab_ - specials_.first_regular));
      std::iota(order.begin(), order.end(), specials_.first_regular);  // specials are never an answer
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int32_t a, std::int32_t b) { return row[a] > row[b]; });
      std::printf("[MASK] %zu of %zu:\n", m + 1, picks.size());
      for (int j = 0; j < k; ++j) {
        const std::string piece = tok_->piece(order[std::size_t(j)]);
        std::size_t width = 0;  // in characters, not bytes ("▁" is 3 bytes)
        for (unsigned char ch : piece) width += (ch & 0xC0) != 0x80;
        std::printf("  %.4f  %s%s %s\n", std::exp(double(row[order[std::size_t(j)]] - top)) / z, piece.c_str(),
                    std::string(width < 14 ? 14 - width : 0, ' ').c_str(), filled_text(o.text("text"), m, piece).c_str());
      }
    }
    return 0;
  }

  // The batches training step 1..N draws and the validation batches, exactly as this run feeds
  // them, for another framework to train on the same data (bench/reference/train_bert.py). Each
  // batch padded to the context: ids [N, batch, context], lengths [N, batch], picks (re-based to
  // b * context + t) and targets concatenated, batch k's at offsets[k] .. offsets[k + 1].
  int export_batches(const Config& o) {
    check_output_file(o.text("out"), "--out", o.flag("overwrite"), ctx_.folder);
    if (P.next_sentence)
      throw config_error("export-batches covers masked-LM runs; this run has next_sentence=true (its pairs and labels are not exported)");
    struct Set {
      std::vector<std::int32_t> ids, lengths, rows, picks, targets, offsets{0};
      void add(const data::MlmBatches& b, std::int64_t batch, std::int64_t context) {
        const std::size_t at = ids.size();
        ids.resize(at + std::size_t(batch * context), kSpecials.pad);
        for (std::int64_t r = 0; r < b.batch(); ++r)
          std::copy_n(b.ids().begin() + r * b.seq(), b.seq(), ids.begin() + std::ptrdiff_t(at) + r * context);
        lengths.insert(lengths.end(), b.lengths().begin(), b.lengths().end());
        lengths.resize(lengths.size() + std::size_t(batch - b.batch()), 0);
        rows.push_back(std::int32_t(b.batch()));
        for (std::int32_t p : b.picks()) picks.push_back(std::int32_t(p / b.seq() * context + p % b.seq()));
        targets.insert(targets.end(), b.targets().begin(), b.targets().end());
        offsets.push_back(std::int32_t(picks.size()));
      }
    } train, val;
    const std::int64_t steps = o.integer("steps");
    for (std::int64_t step = 1; step <= steps && !training::interrupted(); ++step) train_->draw(std::uint64_t(step)), train.add(*train_, batch_, context_);
    for (std::int64_t first = 0; first < std::int64_t(val_seqs_.size()) && !training::interrupted(); first += batch_)
      val_->rows(first, std::min<std::int64_t>(batch_, std::int64_t(val_seqs_.size()) - first)), val.add(*val_, batch_, context_);
    if (training::interrupted()) return 130;
    std::vector<checkpoint::TensorView> t;
    for (auto [name, set] : {std::pair{"train", &train}, std::pair{"val", &val}}) {
      const std::int64_t n = std::int64_t(set->rows.size());
      const std::string p(name);
      t.push_back(checkpoint::view_of<std::int32_t>(p + ".ids", set->ids, {n, batch_, context_}));
      t.push_back(checkpoint::view_of<std::int32_t>(p + ".lengths", set->lengths, {n, batch_}));
      t.push_back(checkpoint::view_of<std::int32_t>(p + ".rows", set->rows, {n}));
      t.push_back(checkpoint::view_of<std::int32_t>(p + ".picks", set->picks, {std::int64_t(set->picks.size())}));
      t.push_back(checkpoint::view_of<std::int32_t>(p + ".targets", set->targets, {std::int64_t(set->targets.size())}));
      t.push_back(checkpoint::view_of<std::int32_t>(p + ".offsets", set->offsets, {n + 1}));
    }
    checkpoint::save(o.text("out"), t, {{"vocab", std::to_string(vocab_)}, {"config", c_.to_json()}});
    std::printf("wrote %s: %lld training batches and %zu validation batches of %lld x %lld\n", o.text("out").c_str(), (long long)steps,
                val.rows.size(), (long long)batch_, (long long)context_);
    return 0;
  }

  Config c_;
  Context ctx_;
  Program<G> model_;
  optim::AdamW<float> opt_;
  std::int64_t context_, batch_;
  std::optional<data::SentencePieceTokenizer> tok_;
  std::int32_t vocab_ = 0;
  data::MlmSpecials specials_;
  std::vector<std::uint8_t> word_starts_;
  std::vector<std::vector<std::int32_t>> train_seqs_, val_seqs_;
  std::optional<data::MlmBatches> train_, val_;
  std::vector<std::int64_t> unigram_;
};

// The preset's shapes with the run's topology switches (each combination is one compiled graph).
template <models::BertConfig P>
std::unique_ptr<Session> open_variant(const Config& c, const Context& ctx) {
  using models::with_next_sentence, models::with_pre_norm;
  const bool nsp = c.flag("next_sentence"), pre = c.flag("pre_norm");
  if (nsp && pre) return std::make_unique<BertSession<with_pre_norm(with_next_sentence(P))>>(c, ctx);
  if (nsp) return std::make_unique<BertSession<with_next_sentence(P)>>(c, ctx);
  if (pre) return std::make_unique<BertSession<with_pre_norm(P)>>(c, ctx);
  return std::make_unique<BertSession<P>>(c, ctx);
}

Task bert_task() {
  Task t;
  t.name = "bert";
  t.summary = "encoder-only masked LM (BERT) on the KJV Bible and Jane Austen, fill-mask";
  t.schema = bert_schema();
  t.data_parallel = true;
  t.commands.push_back({"fill-mask", "the top-k tokens, with probabilities, for each [MASK] of a text", fill_mask_options()});
  t.dependent_defaults = [](Config& c) {  // a preset brings a context that fits it (size=tiny: 32)
    const std::string& size = c.text("size");
    fit_context_to_preset(c, size == "tiny" ? models::kBertTiny.context : size == "base" ? models::kBertBase.context : models::kBertSmall.context);
  };
  Schema exp;
  exp.integer("steps", 2000, {.min = 1, .max = 1 << 20}, "training steps to export").text("out", "bert_batches.safetensors", "the file to write").flag("overwrite", false, "replace an existing --out file");
  t.commands.push_back({"export-batches", "the run's training batches (steps 1..N) and validation batches, for another framework", exp});
  t.training_commands.push_back({"finetune", "bert-finetune", "a classifier from the pretrained run (--pretrained DIR) on a task (--task austen-novel)",
                                 {"task", "pretrained", "init"}});
  t.open = open_presets("bert", "size",
                        {{"size=tiny", &open_variant<models::kBertTiny>} CTGRAD_UNLESS_SMOKE(, {"size=small", &open_variant<models::kBertSmall>},
                                                                                           {"size=base", &open_variant<models::kBertBase>})});
  t.check_against_checkpoint = [](const Config& c, const Config& saved, const Context& ctx) {
    if (ctx.command != "train" && c.integer("context") > saved.integer("context"))  // untrained positions
      throw config_error("the checkpoint in " + ctx.folder.dir().string() + " was trained with context " + saved.show("context") +
                         ": it cannot run at " + c.show("context"));
  };
  return t;
}

const bool registered = register_task(bert_task());

}  // namespace
}  // namespace ctgrad::cli
