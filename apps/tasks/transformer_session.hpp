// The Transformer task's session (apps/tasks/transformer*.cpp): one class for every preset, the
// compiled variant's programs given; its members are defined by concern: training in
// transformer.cpp, evaluation and translation in transformer_eval.cpp, the data and its batches
// in transformer_data.cpp.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <ctgrad/data/seq2seq_batches.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/models/translator.hpp>
#include <ctgrad/models/transformer.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "../task.hpp"
#include "../variants/transformer.hpp"

namespace ctgrad::cli::transformer_task {

namespace in = models::transformer_inputs;
namespace fs = std::filesystem;
using Example = data::Seq2SeqExample;
using Batch = data::Seq2SeqBatch;

constexpr std::int32_t kPad = 0, kUnk = 1, kBos = 2, kEos = 3;  // the shared SentencePiece vocabulary's ids

// The preset's graph: its hyperparameters are every variant's.
constexpr auto kHyperGraph = freeze<models::transformer<models::kTransformerSmall>>();

Example copy_example(std::uint64_t seed, std::uint64_t n);  // the copy task's example n
void feed(Executor<float>& model, const Batch& b);
// One PNG per attention kind and layer, the heads side by side, tokens on the axes.
void write_heatmaps(const Executor<float>& prog, const fs::path& out, int layers, int heads, const std::vector<std::string>& src_tokens,
                    const std::vector<std::string>& tgt_tokens);

class TransformerSession : public Session {
 public:
  TransformerSession(const Config& c, const Context& ctx, const TransformerPrograms& programs);
  Executor<float>& model() override { return *model_; }
  optim::Optimizer<float>& optimizer() override { return opt_; }
  void prepare() override;
  checkpoint::Metadata metadata() override;
  std::vector<std::string> metrics() const override;
  training::LoopOptions loop() override;
  training::Run run() override;
  int after_training(const training::Outcome&) override;
  int eval(const Config& o) override;
  int command(const std::string& name, const Config& o) override;  // translate, export-batches

 private:
  static Options options(const Config& c, const Context& ctx) { return program_options(c, ctx.threads, kHyperGraph); }
  double validation_bleu(std::size_t n);  // corpus BLEU of greedy translations of the first n validation sentences
  double validation_nll();                // of the validation targets (the training loss adds label smoothing)
  struct TranslateStats {
    std::size_t lines = 0, sentences = 0, placeholders = 0, unknown = 0;
  };
  int translate(const Config& o);
  std::vector<std::string> translate_lines(const std::vector<std::string>& lines, std::size_t first_line, const models::BeamOptions& bo,
                                           models::Seq2SeqSearch& tr, TranslateStats& stats);
  models::Seq2SeqSearch translator();
  // A source of at most max_len tokens, </s> included; `what` names a user's text, which is told
  // when it is cut.
  std::vector<std::int32_t> encode_source(const std::string& text, const std::string& what = "") const;
  void heatmaps(const std::string& dir, const std::string& sentence);
  void load_translation_data();
  int export_batches(const Config& o);
  std::vector<std::int64_t> epoch_members(std::uint64_t e) const;
  std::vector<std::int64_t> shard_of(std::span<const std::int64_t> rows) const;
  std::span<const std::int64_t> training_batch(std::int64_t step);

  Config c_;
  Context ctx_;
  bool copy_;
  const TransformerPrograms& programs_;
  std::unique_ptr<Executor<float>> model_;
  optim::Adam<float> opt_;
  int vocab_;  // the compiled variant's
  std::int64_t batch_, max_len_;
  std::uint64_t seed_;
  std::unique_ptr<data::SentencePieceTokenizer> tok_;
  std::vector<Example> train_, val_, test_, copy_batch_;  // train_: the sentence pairs, then the phrases
  std::vector<std::pair<std::string, std::vector<Example>>> other_tests_;  // scored apart (data/en_de.hpp)
  std::int64_t sentences_ = 0;
  std::size_t dropped_ = 0;  // pairs sharing a side with a held-out pair (data/en_de.hpp)
  mutable std::vector<std::int64_t> phrase_order_;
  std::unordered_map<std::string, bool> unknown_chars_;  // whether the vocabulary lacks a character
  std::vector<std::vector<std::int64_t>> epoch_;
  std::vector<std::int64_t> epoch_sizes_;  // batches per epoch, as far as computed
  std::uint64_t epoch_no_ = ~0ull;
  std::int64_t shard_tokens_ = 0;
};

}  // namespace ctgrad::cli::transformer_task
