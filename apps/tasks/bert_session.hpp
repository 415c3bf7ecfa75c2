// The BERT task's session (apps/tasks/bert*.cpp): one class for every preset and topology, the
// compiled program given; training and the data in bert.cpp, validation, fill-mask and
// export-batches in bert_eval.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ctgrad/data/hf_tokenizer.hpp>
#include <ctgrad/data/mlm.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/models/bert.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

#include "../task.hpp"
#include "bert_data.hpp"

namespace ctgrad::cli::bert {

namespace in = models::bert_inputs;

Schema fill_mask_options();

// The model keys `train bert` and `finetune bert` share: the preset, the size keys, pre_norm.
void add_bert_model_keys(Schema& s, const std::string& size_help, const std::string& pre_norm_help);
// The config's model: a preset, its sizes and topology overridden by the keys given.
models::BertConfig bert_config(const Config& c);
// --from DIR: the model keys a Hugging Face BERT folder sets, its tokenizer's kind among them (a
// config_error for another family, or a folder without a tokenizer).
std::vector<std::pair<std::string, std::string>> hf_keys(const std::filesystem::path& dir, const pretrained::HfModel& m);
// context fitted to max_context (or the preset's) when not given.
void fit_bert_context(Config& c);

// A BERT run's vocabulary: the SentencePiece model `train bert` learns ([PAD] [UNK] [CLS] [SEP]
// [MASK] first, "▁" starting a word), or a model folder's WordPiece tokenizer.json ("##"
// continuing one; the specials looked up by name). What the session asks of either.
class BertVocab {
 public:
  explicit BertVocab(data::SentencePieceTokenizer t) : sp_(std::move(t)) {}
  explicit BertVocab(data::HfTokenizer t);
  static BertVocab load(const std::filesystem::path& file);  // tokenizer.json or a SentencePiece model
  std::int32_t vocab_size() const { return sp_ ? sp_->vocab_size() : hf_->vocab_size(); }
  std::string piece(std::int32_t id) const { return sp_ ? sp_->piece(id) : hf_->token(id); }
  bool starts_word(std::int32_t id) const;
  // A piece as it is written into text, and whether it starts a word ("▁heaven": "heaven", yes; "##s": "s", no).
  std::pair<std::string, bool> written(std::int32_t id) const;
  std::vector<std::int32_t> encode(const std::string& text) const { return sp_ ? sp_->encode(text) : hf_->encode(text); }
  std::vector<std::vector<std::int32_t>> encode_all(const std::vector<std::string>& texts, const data::DataCache& cache) const;
  // The specials' ids (a config_error naming `file` when the vocabulary lacks one).
  data::MlmSpecials specials(const std::filesystem::path& file) const;
  const data::Tokenizer& tokenizer() const { return sp_ ? static_cast<const data::Tokenizer&>(*sp_) : *hf_; }

 private:
  std::optional<data::SentencePieceTokenizer> sp_;
  std::shared_ptr<const data::HfTokenizer> hf_;
};

class BertSession : public Session {
 public:
  BertSession(const Config& c, const Context& ctx);
  Executor<float>& model() override { return *model_; }
  optim::Optimizer<float>& optimizer() override { return opt_; }
  void prepare() override;
  checkpoint::Metadata metadata() override;
  std::vector<std::string> metrics() const override;
  training::LoopOptions loop() override;
  training::Run run() override;
  int eval(const Config&) override;
  // What the model learned, shown: the masked-token accuracy against the baseline, and a fill-mask.
  int after_training(const training::Outcome& out) override;
  int command(const std::string& name, const Config& o) override;  // fill-mask, export-batches

 private:
  struct Baseline {
    double loss, accuracy;
    std::int32_t most_frequent;
  };
  struct Scores {
    double loss, accuracy, next_sentence_accuracy;
  };
  Baseline unigram_baseline();  // predicting every masked token from the training split's token frequencies alone
  // The batch, or a data-parallel rank's rows of it (the batch's padded length kept, so each
  // rank's dropout masks are its rows' of the whole batch) with the picks in them.
  void set_batch(const data::MlmBatches& b, training::Shard shard = {});
  // MLM loss (per masked token) and masked-token accuracy over the validation sequences, with
  // their fixed masks (and pairs); with next-sentence prediction, its accuracy too.
  Scores validate();
  // The user's text with its m-th [MASK] replaced by a piece (the others kept): a word-start piece
  // ("▁heaven") is a new word, any other ("," "s") joins the text before it.
  static std::string filled_text(const std::string& text, std::size_t m, const std::string& piece, bool new_word);
  int fill_mask(const Config& o);
  int export_batches(const Config& o);

  models::BertConfig p_;
  Config c_;
  Context ctx_;
  std::shared_ptr<const PlannedGraph> planned_;
  std::unique_ptr<Executor<float>> model_;
  optim::AdamW<float> opt_;
  std::int64_t context_, batch_;
  std::optional<BertVocab> tok_;
  std::string tok_name_;  // the run's tokenizer file: tokenizer.model or tokenizer.json
  std::int32_t vocab_ = 0;
  data::MlmSpecials specials_;
  std::vector<std::uint8_t> word_starts_;
  std::vector<std::vector<std::int32_t>> train_seqs_, val_seqs_;
  std::optional<data::MlmBatches> train_, val_;
  std::vector<std::int64_t> unigram_;
  std::vector<std::int32_t> picks_, targets_;  // of this rank's rows
  std::int64_t shard_picks_ = 0;
};

}  // namespace ctgrad::cli::bert
