// A Hugging Face tokenizer.json (the `tokenizers` library's serialisation), encoded and decoded as
// that library does: added and special tokens split out first, then normalizer, pre-tokenizer,
// model, post-processor; decoding through the decoder. What is supported:
//   normalizers     NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, Precompiled,
//                   BertNormalizer, Sequence
//   pre-tokenizers  ByteLevel, Split, Metaspace, BertPreTokenizer, Whitespace, WhitespaceSplit,
//                   Digits, Punctuation, Sequence
//   models          BPE (byte-level or with byte fallback; ignore_merges), WordPiece, Unigram,
//                   WordLevel
//   post-processors TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence
//   decoders        ByteLevel, WordPiece, Metaspace, BPEDecoder, Replace, ByteFallback, Fuse,
//                   Strip, Sequence
// (Precompiled: SentencePiece's compiled rules, data/hf_precompiled.cpp.) Anything else (a CTC
// decoder, BPE dropout) is refused by name when
// the file is loaded, as is a malformed file (a merge naming a token the vocabulary lacks, ids
// out of range): a data_error naming the file and the field. Unicode (normalization forms,
// case mapping, \p{...} classes of the pre-tokenizers' regular expressions) comes from ICU.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>

namespace ctgrad::data {

class HfTokenizer : public Tokenizer {
 public:
  static HfTokenizer load(const std::filesystem::path& path);
  static HfTokenizer parse(const std::string& json, const std::string& where);  // the file's text
  HfTokenizer(HfTokenizer&&) noexcept;
  HfTokenizer& operator=(HfTokenizer&&) noexcept;
  ~HfTokenizer() override;

  // With the post-processor's special tokens (Llama's <s>, BERT's [CLS] ... [SEP]) when asked,
  // as Hugging Face's encode(text, add_special_tokens).
  std::vector<std::int32_t> encode(const std::string& text, bool add_special_tokens) const;
  std::vector<std::int32_t> encode(const std::string& text) const override { return encode(text, false); }
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const;
  std::string decode(const std::vector<std::int32_t>& ids) const override { return decode(ids, false); }
  std::int32_t vocab_size() const override;
  std::string kind() const override { return "huggingface"; }
  void save(const std::filesystem::path& path) const override;  // the file as loaded
  // The id of a token of the vocabulary or an added token (-1: none), and the token of an id
  // ("" where the id has none).
  std::int32_t token_id(const std::string& token) const;
  std::string token(std::int32_t id) const;
  // The text after the normalizer alone (Hugging Face's normalizer.normalize_str).
  std::string normalize(const std::string& text) const;
  const std::string& model_type() const;  // "BPE", "WordPiece", "Unigram", "WordLevel"
  // The ids the post-processor puts before a sequence (Llama's <s>): a prompt starts with them.
  const std::vector<std::int32_t>& special_prefix() const;

  struct Impl;

 private:
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A character tokenizer (one token per byte value) as a tokenizer.json: byte-level BPE without
// merges, each byte its GPT-2 character, the unknown id "<unk>"; the same ids for any text it encodes.
std::string hf_tokenizer_json(const CharTokenizer& t);

// Whether a tokenizer .json file is Hugging Face's (an object with a "model"), not ctgrad's
// character vocabulary: by its content, since both are named tokenizer.json.
bool is_hf_tokenizer_file(const std::filesystem::path& path);

}  // namespace ctgrad::data
