// The translation session shared by the encoder-decoder models (apps/tasks/transformer.cpp,
// seq2seq.cpp): a model brings its programs and how it decodes (TranslationModel); the session
// owns the rest: the EN-DE data and its batches (translation_data.cpp), training
// (translation.cpp), evaluation, heatmaps and `translate` (translation_eval.cpp).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <ctgrad/data/seq2seq_batches.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/models/translator.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "../task.hpp"

namespace ctgrad::cli::translation {

namespace fs = std::filesystem;
using Example = data::Seq2SeqExample;
using Batch = data::Seq2SeqBatch;

constexpr std::int32_t kPad = 0, kUnk = 1, kBos = 2, kEos = 3;  // the shared SentencePiece vocabulary's ids

// What a model brings to the session.
struct TranslationModel {
  std::string name;       // the task's ("transformer", "seq2seq")
  bool copy_task = false;  // the run is the copy task (the Transformer's task=copy), not translation
  int vocab = 0, pad = 0;
  int max_positions = 0;  // rows of a learned position table (0: any length)
  int width = 0;          // d_model (hidden), written by export-batches
  std::string summary;    // the first line of training: layers, widths, parameters
  Options options;        // the training program's, the config's hyperparameters set
  optim::AdamOptions adam;
  std::function<double(std::int64_t)> lr;  // learning rate of step s
  double clip = 0;                          // the gradient norm's bound (0: none)
  std::function<std::unique_ptr<Executor<float>>(const Options&)> train;
  std::function<std::unique_ptr<models::TranslationSearch>(std::span<const Parameter<float>>, const Options&)> search;
  // Attention heatmaps of one translation: the PNGs it writes into a folder, and the drawing,
  // given the source and <s> + translation as ids and as the pieces shown on the axes.
  std::vector<std::string> heatmap_files;
  std::function<void(std::span<const Parameter<float>>, const Options&, const fs::path& dir, const std::vector<std::int32_t>& src,
                     const std::vector<std::int32_t>& tgt_in, const std::vector<std::string>& src_pieces, const std::vector<std::string>& tgt_pieces)>
      heatmaps;
};

// The keys every translation model has: data, vocabulary, batches, steps, validation, decoding.
void add_translation_keys(Schema& s);
// The commands every translation model has: eval, translate, export-batches.
void add_translation_commands(Task& t);
// One PNG of attention weights [heads, rows, cols], the heads side by side, tokens on the axes (gnuplot).
void draw_heatmap(const fs::path& png, const std::string& title, int heads, const float* weights, std::int64_t rows, std::int64_t cols,
                  const std::vector<std::string>& col_tokens, const std::vector<std::string>& row_tokens);

Example copy_example(std::uint64_t seed, std::uint64_t n);  // the copy task's example n
void feed(Executor<float>& model, const Batch& b);

class TranslationSession : public Session {
 public:
  TranslationSession(const Config& c, const Context& ctx, TranslationModel model);
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
  double validation_bleu(std::size_t n);  // corpus BLEU of greedy translations of the first n validation sentences
  double validation_nll();                // of the validation targets (the training loss adds label smoothing)
  struct TranslateStats {
    std::size_t lines = 0, sentences = 0, placeholders = 0, unknown = 0, controls = 0;
  };
  int translate(const Config& o);
  std::vector<std::string> translate_lines(const std::vector<std::string>& lines, std::size_t first_line, const models::BeamOptions& bo,
                                           models::TranslationSearch& tr, TranslateStats& stats);
  std::unique_ptr<models::TranslationSearch> translator();
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
  TranslationModel m_;
  std::unique_ptr<Executor<float>> model_;
  optim::Adam<float> opt_;
  int vocab_;
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

}  // namespace ctgrad::cli::translation
