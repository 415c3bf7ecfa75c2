// data::HfTokenizer beyond the oracle test (tests/data/hf_tokenizers/): hostile tokenizer.json
// files refused with one line naming the fault, and the decoding rules where Hugging Face's Rust
// library and its JavaScript port differ (ctgrad follows the Rust library).
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include <ctgrad/data/hf_tokenizer.hpp>
#include <ctgrad/data/text.hpp>

using namespace ctgrad;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

json bpe(json merges) {
  return {{"version", "1.0"},
          {"added_tokens", json::array({{{"id", 5}, {"content", "<s>"}, {"special", true}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"\xC4\xA0", 3}, {"\xC4\xA0" "a", 4}}}, {"merges", merges}}}};
}

std::string refusal(const json& j) {
  try {
    data::HfTokenizer::parse(j.dump(), "tokenizer.json");
  } catch (const data::data_error& e) {
    const std::string m = e.what();
    CHECK(m.find('\n') == std::string::npos);
    return m;
  }
  return "";
}

}  // namespace

TEST_CASE("a byte-level BPE tokenizer.json: merges by rank, added tokens split out first", "[data]") {
  const auto t = data::HfTokenizer::parse(bpe({"a b", "\xC4\xA0 a"}).dump(), "tokenizer.json");
  CHECK(t.encode("ab a<s>ab") == std::vector<std::int32_t>{2, 4, 5, 2});
  CHECK(t.decode({0, 1, 2, 5}) == "abab<s>");
  CHECK(t.decode({0, 5}, true) == "a");
  CHECK(t.vocab_size() == 6);
  CHECK(t.token_id("<s>") == 5);
  CHECK_THROWS_WITH(t.decode({6}), Contains("id 6 is outside [0, 6)"));
}

TEST_CASE("a hostile tokenizer.json is refused naming the fault", "[data]") {
  CHECK(refusal(bpe({"a b"})).empty());
  CHECK_THAT(refusal(bpe({"a c"})), Contains("merge 0 ('a' + 'c') names 'c', which the vocabulary lacks"));
  CHECK_THAT(refusal(bpe({"a b", "b a"})), Contains("merge 1 ('b' + 'a') names 'ba'"));
  CHECK_THAT(refusal(bpe({"ab"})), Contains("merge 0 'ab' is not two tokens separated by one space"));
  CHECK_THAT(refusal(bpe({42})), Contains("merge 0 is not \"a b\""));
  json j = bpe({"a b"});
  j["model"]["vocab"]["dup"] = 1;
  CHECK_THAT(refusal(j), Contains("id 1 is given to two tokens"));
  j = bpe({"a b"});
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  CHECK_THAT(refusal(j), Contains("precompiled_charsmap is shorter than its header"));
  j["normalizer"]["precompiled_charsmap"] = "!!!!";
  CHECK_THAT(refusal(j), Contains("precompiled_charsmap is not base64"));
  j["normalizer"]["precompiled_charsmap"] = "6AMAAAAAAAA=";  // a trie of 1000 bytes in 8
  CHECK_THAT(refusal(j), Contains("trie of 1000 bytes does not fit its 8 bytes"));
  j = bpe({"a b"});
  j["normalizer"] = {{"type", "Unknown"}};
  CHECK_THAT(refusal(j), Contains("normalizer 'Unknown' is not supported"));
  j = bpe({"a b"});
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  CHECK_THAT(refusal(j), Contains("the regular expression '(unclosed' does not compile"));
  j = bpe({"a b"});
  j["model"]["dropout"] = 0.1;
  CHECK_THAT(refusal(j), Contains("BPE dropout is not supported"));
  j = bpe({"a b"});
  j["decoder"] = {{"type", "CTC"}};
  CHECK_THAT(refusal(j), Contains("decoder 'CTC' is not supported"));
  j = bpe({"a b"});
  j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<bos>"}}}}}}, {"special_tokens", json::object()}};
  CHECK_THAT(refusal(j), Contains("special token '<bos>' is not in special_tokens"));
  CHECK_THAT(refusal(json::array({1, 2})), Contains("not a Hugging Face tokenizer.json"));
  try {
    data::HfTokenizer::parse("{\"model\": ", "tokenizer.json");
    FAIL("parsed");
  } catch (const data::data_error& e) {
    CHECK_THAT(std::string(e.what()), Contains("tokenizer tokenizer.json: not JSON"));
  }
}

TEST_CASE("ByteFallback decodes an invalid byte run to one U+FFFD per byte, as Hugging Face's Rust library", "[data]") {
  // tokenizers/src/decoders/byte_fallback.rs: String::from_utf8 of the run, or "\u{FFFD}" per byte.
  const json j = {{"model", {{"type", "BPE"}, {"vocab", {{"<0xE2>", 0}, {"<0x82>", 1}, {"<0xAC>", 2}, {"<0x22>", 3}, {"x", 4}}}, {"merges", json::array()}}},
                  {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}}};
  const auto t = data::HfTokenizer::parse(j.dump(), "tokenizer.json");
  CHECK(t.decode({0, 1, 2, 4}) == "\xE2\x82\xAC" "x");                         // a whole euro sign
  CHECK(t.decode({3, 0, 1, 4}) == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "x");  // '"' and a cut euro sign: three bytes, three U+FFFD
}

namespace {
data::HfTokenizer with_pre(json pre, json vocab, json decoder = nullptr) {
  const json j = {{"pre_tokenizer", pre}, {"decoder", decoder}, {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "?"}}}};
  return data::HfTokenizer::parse(j.dump(), "tokenizer.json");
}
}  // namespace

TEST_CASE("split behaviours and Metaspace as tokenizers' own tests have them", "[data]") {
  // tokenizers/src/pre_tokenizers/split.rs: "The-final--countdown" split on "-".
  const json words = {{"?", 0}, {"The", 1}, {"The-", 2}, {"final", 3}, {"final-", 4}, {"-", 5}, {"countdown", 6}, {"-final", 7}, {"-countdown", 8}};
  auto split = [&](const char* how) {
    return with_pre({{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", how}}, words).encode("The-final--countdown");
  };
  CHECK(split("MergedWithPrevious") == std::vector<std::int32_t>{2, 4, 5, 6});  // The- final- - countdown
  CHECK(split("MergedWithNext") == std::vector<std::int32_t>{1, 7, 5, 8});      // The -final - -countdown
  CHECK(split("Isolated") == std::vector<std::int32_t>{1, 5, 3, 5, 5, 6});
  CHECK(split("Removed") == std::vector<std::int32_t>{1, 3, 6});
  // metaspace.rs, multiple_spaces: "Hey   friend" -> ▁Hey ▁ ▁ ▁friend; the decoder drops the first token's ▁.
  const json pieces = {{"?", 0}, {"\xE2\x96\x81Hey", 1}, {"\xE2\x96\x81", 2}, {"\xE2\x96\x81" "friend", 3}};
  const auto m = with_pre({{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}, pieces,
                          {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}});
  CHECK(m.encode("Hey   friend") == std::vector<std::int32_t>{1, 2, 2, 3});
  CHECK(m.decode({1, 2, 2, 3}) == "Hey   friend");
  CHECK(m.decode({2, 1}) == " Hey");  // the first token's replacement characters are all dropped
  CHECK(m.encode("Hey you") == std::vector<std::int32_t>{1, 0});  // "▁you" is unknown: the unk_token "?"
}

TEST_CASE("a tokenizer.json that would hang, exhaust memory or drop text is refused", "[data]") {
  std::string deep = "{\"model\": ";
  for (int i = 0; i < 100000; ++i) deep += "[";
  CHECK_THROWS_WITH(data::HfTokenizer::parse(deep, "tokenizer.json"), Contains("nests deeper than 64 levels"));
  json j = bpe({"a b"});
  j["decoder"] = {{"type", "Strip"}, {"content", ""}, {"start", 1000000000000}, {"stop", 0}};
  CHECK_THAT(refusal(j), Contains("'content' must be one character"));
  j = bpe({"a b"});
  j["model"]["vocab"]["far"] = 2147483647;
  CHECK_THAT(refusal(j), Contains("is not an integer in [0, 2^24)"));
  // Catastrophic backtracking runs into ICU's time limit: an error, not a hang or a silent partial split.
  j = bpe({"a b"});
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}};
  const auto slow = data::HfTokenizer::parse(j.dump(), "tokenizer.json");
  CHECK_THROWS_WITH(slow.encode(std::string(40, 'a') + "b"), Contains("a regular expression of the tokenizer failed"));
  // No unknown token: what the vocabulary cannot encode is an error, as tokenizers' MissingUnkToken.
  const json wl = {{"model", {{"type", "WordLevel"}, {"vocab", {{"a", 0}}}}}, {"pre_tokenizer", {{"type", "WhitespaceSplit"}}}};
  CHECK_THROWS_WITH(data::HfTokenizer::parse(wl.dump(), "t").encode("a b"), Contains("lacks 'b' and has no unk_token"));
}

TEST_CASE("BPE with a continuing-subword prefix merges as tokenizers does", "[data]") {
  const json j = {{"model", {{"type", "BPE"}, {"continuing_subword_prefix", "##"}, {"vocab", {{"a", 0}, {"##b", 1}, {"ab", 2}, {"##c", 3}, {"abc", 4}}},
                             {"merges", {"a ##b", "ab ##c"}}}}};
  const auto t = data::HfTokenizer::parse(j.dump(), "tokenizer.json");
  CHECK(t.encode("abc") == std::vector<std::int32_t>{4});
  CHECK(t.encode("ab") == std::vector<std::int32_t>{2});
}

// A compiled charsmap of one rule, "a" -> "b", built by hand as a Darts-clone double array: the
// root's offset 2 leads byte 'a' to unit 2 ^ 0x61 (label 'a', a leaf, offset 1), whose value unit
// (99 ^ 1) points at replacement 0. A cluster shorter than 6 bytes is replaced whole when a rule
// matches a prefix of it, as Hugging Face's spm_precompiled does ("a" + U+0301 becomes "b").
TEST_CASE("the Precompiled normalizer applies a compiled charsmap as Hugging Face does", "[data][tokenizer]") {
  std::vector<std::uint32_t> units(100, 0);
  units[0] = 2u << 10;
  units[99] = (1u << 10) | (1u << 8) | 0x61;
  units[98] = 0;
  std::string blob(4, '\0');
  const std::uint32_t bytes = std::uint32_t(units.size() * 4);
  for (int k = 0; k < 4; ++k) blob[std::size_t(k)] = char((bytes >> (8 * k)) & 0xFF);
  for (std::uint32_t u : units)
    for (int k = 0; k < 4; ++k) blob.push_back(char((u >> (8 * k)) & 0xFF));
  blob += std::string("b\0", 2);
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;
  for (std::size_t i = 0; i < blob.size(); i += 3) {
    std::uint32_t v = std::uint32_t(static_cast<unsigned char>(blob[i])) << 16;
    if (i + 1 < blob.size()) v |= std::uint32_t(static_cast<unsigned char>(blob[i + 1])) << 8;
    if (i + 2 < blob.size()) v |= std::uint32_t(static_cast<unsigned char>(blob[i + 2]));
    b64 += kAlphabet[(v >> 18) & 63], b64 += kAlphabet[(v >> 12) & 63];
    b64 += i + 1 < blob.size() ? kAlphabet[(v >> 6) & 63] : '=';
    b64 += i + 2 < blob.size() ? kAlphabet[v & 63] : '=';
  }
  json j = {{"version", "1.0"},
            {"added_tokens", json::array()},
            {"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", b64}}},
            {"model", {{"type", "WordLevel"}, {"vocab", {{"<unk>", 0}}}, {"unk_token", "<unk>"}}}};
  const auto tok = data::HfTokenizer::parse(j.dump(), "test");
  CHECK(tok.normalize("xa\u00e9a") == "xb\u00e9b");
  CHECK(tok.normalize("a\u0301c") == "bc");   // one cluster, replaced whole
  CHECK(tok.normalize("\u00e9\u0301") == "\u00e9\u0301");  // no rule: kept character by character
}
