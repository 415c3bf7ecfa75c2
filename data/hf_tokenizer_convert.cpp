// ctgrad's tokenizers as Hugging Face tokenizer.json files (ctgrad export).
#include <ctgrad/data/hf_tokenizer.hpp>

#include "hf_tokenizer_parts.hpp"

namespace ctgrad::data {

using hf::json;

std::string hf_tokenizer_json(const CharTokenizer& t) {
  json vocab = json::object();
  const std::int32_t bytes = t.vocab_size() - (t.has_unknown() ? 1 : 0);
  for (std::int32_t id = 0; id < bytes; ++id) {
    const std::string b = t.decode({id});
    vocab[hf::byte_chars()[static_cast<unsigned char>(b.at(0))]] = id;
  }
  json model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", json::array()}};
  const json added = json::array();  // "<unk>" is the model's unknown token only: the text "<unk>" is bytes, as for ctgrad
  if (t.has_unknown()) model["vocab"]["<unk>"] = bytes, model["unk_token"] = "<unk>";
  const json j = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}, {"normalizer", nullptr},
                  {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
                  {"post_processor", nullptr}, {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
                  {"model", model}};
  return j.dump(1) + "\n";
}

}  // namespace ctgrad::data
