// The stages of a Hugging Face tokenizer (data/hf_tokenizer.hpp), one small class hierarchy per
// stage, each built from its tokenizer.json object. Internal to data/hf_tokenizer*.cpp.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace ctgrad::data::hf {

using json = nlohmann::json;

// Refuses a tokenizer.json: a data_error "<where>: <what>".
[[noreturn]] void refuse(const std::string& where, const std::string& what);

// Fields of a tokenizer.json object: a string or a flag (absent or null: the fallback), else refused.
std::string text_field(const json& j, const char* key, const std::string& where, const std::string& fallback = "");
bool flag_field(const json& j, const char* key, const std::string& where, bool fallback);
// The field as a reference (null when absent): no copy of a large or deep value.
const json& field(const json& j, const char* key);

// UTF-8 helpers: code points of a string (invalid bytes as U+FFFD), and back.
std::vector<char32_t> code_points(const std::string& s);
std::string utf8(char32_t c);
// Bytes to text, each maximal invalid subsequence replaced by U+FFFD (as Rust's from_utf8_lossy).
std::string lossy_utf8(const std::string& bytes);

// GPT-2's byte-level alphabet: byte b as a printable character (printable bytes as themselves).
const std::vector<std::string>& byte_chars();

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual std::string apply(const std::string& s) const = 0;
};
std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& where);  // null: none
std::unique_ptr<Normalizer> make_precompiled(const json& j, const std::string& where);  // data/hf_precompiled.cpp

// A piece of a pre-tokenized segment. `first`: the segment begins the input (Metaspace's "first").
struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  virtual std::vector<std::string> split(const std::string& s, bool first) const = 0;
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where);

struct Model {
  virtual ~Model() = default;
  virtual void encode(const std::string& piece, std::vector<std::int32_t>& out) const = 0;
  std::map<std::string, std::int32_t, std::less<>> vocab;
  std::vector<std::string> tokens;  // id -> token (empty where an id has none)
  std::string type;
};
std::unique_ptr<Model> make_model(const json& j, const std::string& where);

struct Decoder {
  virtual ~Decoder() = default;
  virtual std::vector<std::string> decode(std::vector<std::string> tokens) const = 0;
};
std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& where);

}  // namespace ctgrad::data::hf
