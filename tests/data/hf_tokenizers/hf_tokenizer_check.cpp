// ctgrad's side of tests/data/hf_tokenizers/oracle.mjs: encodes and decodes each line of
// EXPECTED.jsonl with data::HfTokenizer and compares with what Hugging Face's implementation gave
// (ids without and with special tokens, the decoded ids, the decoded ids skipping special tokens,
// random ids decoded); with --normalize, compares each line's normalized text with another oracle's
// (SentencePiece's spm_normalize for the Precompiled normalizer).
//   hf_tokenizer_check TOKENIZER.json EXPECTED.jsonl
//   hf_tokenizer_check --normalize TOKENIZER.json EXPECTED.jsonl
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <ctgrad/data/hf_tokenizer.hpp>

namespace {
std::string show(const std::vector<std::int32_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}
}  // namespace

// Each line's {"text", "normalized"}: the tokenizer's normalizer must give "normalized".
int check_normalized(const char* tokenizer, const char* expected) {
  const auto tok = ctgrad::data::HfTokenizer::load(tokenizer);
  std::ifstream in(expected);
  std::string row;
  int lines = 0, wrong = 0;
  while (std::getline(in, row)) {
    const nlohmann::json e = nlohmann::json::parse(row);
    const std::string got = tok.normalize(e["text"].get<std::string>());
    ++lines;
    if (got != e["normalized"].get<std::string>() && ++wrong <= 3)
      std::printf("  line %d %s:\n    normalized %s\n          want %s\n", lines, e["text"].dump().c_str(), nlohmann::json(got).dump().c_str(),
                  e["normalized"].dump().c_str());
  }
  std::printf("%s: %d of %d lines normalized as SentencePiece's spm_normalize\n", tokenizer, lines - wrong, lines);
  return wrong || lines == 0 ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--normalize") try {
      return check_normalized(argv[2], argv[3]);
    } catch (const std::exception& ex) {
      std::printf("hf_tokenizer_check: %s\n", ex.what());
      return 1;
    }
  if (argc != 3) return std::fprintf(stderr, "usage: hf_tokenizer_check [--normalize] TOKENIZER.json EXPECTED.jsonl\n"), 2;
  try {
    const auto tok = ctgrad::data::HfTokenizer::load(argv[1]);
    std::ifstream in(argv[2]);
    std::string row;
    int lines = 0, wrong = 0;
    while (std::getline(in, row)) {
      const nlohmann::json e = nlohmann::json::parse(row);
      const std::string text = e["text"];
      const auto want = e["ids"].get<std::vector<std::int32_t>>(), want_special = e["special_ids"].get<std::vector<std::int32_t>>();
      const auto ids = tok.encode(text, false), special = tok.encode(text, true);
      const std::string decoded = tok.decode(want, false), skipped = tok.decode(want_special, true);
      ++lines;
      std::string why;
      if (ids != want) why += "\n    ids " + show(ids) + "\n   want " + show(want);
      if (special != want_special) why += "\n    with special tokens " + show(special) + "\n                   want " + show(want_special);
      if (decoded != e["decoded"].get<std::string>()) why += "\n    decoded " + nlohmann::json(decoded).dump() + "\n       want " + e["decoded"].dump();
      if (skipped != e["skipped"].get<std::string>()) why += "\n    decoded skipping specials " + nlohmann::json(skipped).dump() + "\n                         want " + e["skipped"].dump();
      if (e.contains("random_ids")) {
        const std::string r = tok.decode(e["random_ids"].get<std::vector<std::int32_t>>(), false);
        if (r != e["random_decoded"].get<std::string>())
          why += "\n    ids " + e["random_ids"].dump() + " decoded " + nlohmann::json(r).dump() + "\n    want " + e["random_decoded"].dump();
      }
      if (!why.empty() && ++wrong <= 3) std::printf("  line %d %s:%s\n", lines, nlohmann::json(text).dump().c_str(), why.c_str());
    }
    std::printf("%s (%s, %d tokens): %d of %d lines encode and decode as Hugging Face's\n", argv[1], tok.model_type().c_str(), tok.vocab_size(),
                lines - wrong, lines);
    return wrong || lines == 0 ? 1 : 0;
  } catch (const std::exception& ex) {
    std::printf("hf_tokenizer_check: %s\n", ex.what());
    return 1;
  }
}
