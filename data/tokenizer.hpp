// Tokenizers: character level, and SentencePiece (BPE or unigram, Debian libsentencepiece-dev),
// trained on the training split, saved next to a checkpoint and loaded back.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include <ctgrad/data/cache.hpp>

namespace ctgrad::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<std::int32_t> encode(const std::string& text) const = 0;  // throws on unknown input
  virtual std::string decode(const std::vector<std::int32_t>& ids) const = 0;    // throws on ids out of range
  virtual std::int32_t vocab_size() const = 0;
  virtual std::string kind() const = 0;                                          // "char" or "sentencepiece"
  virtual void save(const std::filesystem::path& path) const = 0;
};

// One token per byte value seen in the training text, in byte order; with `unknown`, one more id
// (the last) for every byte not seen, decoded as U+FFFD, so any text encodes.
class CharTokenizer : public Tokenizer {
 public:
  static CharTokenizer train(const std::string& text, bool unknown = false);
  static CharTokenizer load(const std::filesystem::path& path);  // a JSON list of byte values
  std::vector<std::int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<std::int32_t>& ids) const override;
  std::int32_t vocab_size() const override { return std::int32_t(chars_.size()) + unknown_; }
  std::string kind() const override { return "char"; }
  bool has_unknown() const { return unknown_; }
  void save(const std::filesystem::path& path) const override;

 private:
  std::vector<unsigned char> chars_;
  std::int32_t index_[256];
  bool unknown_ = false;
};

struct SentencePieceOptions {
  std::int32_t vocab_size = 2000;
  std::string model_type = "bpe";  // or "unigram"
  std::uint64_t seed = 0;
  // Special ids (-1: none). SentencePiece's defaults: unk 0, bos 1, eos 2, no padding.
  std::int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  std::string unk_piece = "<unk>", pad_piece = "<pad>";
  // Pieces kept whole and given the ids after the specials, in order ("[CLS]", "[SEP]", "[MASK]"):
  // the text "[MASK]" encodes as that one id.
  std::vector<std::string> user_defined_symbols = {};
  // Sentences (lines) sampled from the text to train on; 0: all of them.
  std::int64_t input_sentence_size = 0;
  // Longer lines are left out of training (0: SentencePiece's 4192 bytes).
  std::int64_t max_sentence_length = 0;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Trains on `text`, writes `<prefix>.model` and loads it. With a cache, a model trained before on
  // the same text with the same options (and SentencePiece version) is taken from it instead.
  static SentencePieceTokenizer train(const std::string& text, const std::filesystem::path& prefix, SentencePieceOptions o = {},
                                      const DataCache& cache = {});
  static SentencePieceTokenizer load(const std::filesystem::path& model_file);
  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  ~SentencePieceTokenizer() override;
  std::vector<std::int32_t> encode(const std::string& text) const override;
  // Each text encoded, in parallel on the calling oneTBB arena (SentencePiece's encoding is
  // thread-safe); with a cache, the ids of the same texts under the same model are read from it.
  std::vector<std::vector<std::int32_t>> encode_all(std::span<const std::string> texts, const DataCache& cache = {}) const;
  std::string decode(const std::vector<std::int32_t>& ids) const override;
  std::int32_t vocab_size() const override;
  std::string kind() const override { return "sentencepiece"; }
  std::int32_t bos_id() const;  // -1 when the model has none
  std::int32_t eos_id() const;
  std::int32_t pad_id() const;
  std::string piece(std::int32_t id) const;          // "▁the", "[MASK]"
  std::int32_t piece_id(const std::string& piece) const;  // -1 when the vocabulary lacks it
  // Whether the piece starts a word (SentencePiece marks a word's first piece with "▁").
  bool starts_word(std::int32_t id) const;
  void save(const std::filesystem::path& path) const override;  // copies the .model file

 private:
  SentencePieceTokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctgrad::data
