#include "lm_data.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

#include <ctgrad/data/hf_tokenizer.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/text_source.hpp>
#include <ctgrad/training/escape.hpp>

#include "text_corpus.hpp"

namespace ctgrad::cli {

namespace fs = std::filesystem;

void add_text_data_keys(Schema& s, const std::string& default_data, const std::string& named) {
  s.text("data", default_data, "the text: " + named + "; or a file, a folder (its .txt, .md and .jsonl files, also .gz or .zst), or a glob", Role::run)
      .text("val_data", "", "validation text (as data; empty: documents of data held out by val_fraction)", Role::run)
      .real("val_fraction", 0.1, {.min = 0, .max = 0.5, .min_open = true}, "the share of documents held out, chosen by a hash of each", Role::run)
      .text("text_field", "text", "the field of a JSON Lines record that holds its text", Role::run);
  s.stated_when_set({"data", "val_data", "val_fraction", "text_field"});
}

void add_lm_data_keys(Schema& s) {
  add_text_data_keys(s, "kjv", "kjv (the King James Bible) or austen (Jane Austen's novels), or a folder of token shards (ctgrad data tokenize)");
  s.flag("span_documents", false, "windows may run across documents (joined end to end); else each window lies within one", Role::run);
  s.stated_when_set({"span_documents"});
}

data::Corpus read_user_text(const Config& c) {
  data::TextSourceOptions o{.text_field = c.text("text_field")};
  o.max_total_bytes = std::size_t(std::max(available_bytes() / 8, 1e6));  // the text, its ids (4 bytes each) and the tokenizer's copy
  try {
    return data::read_corpus(c.text("data"), c.text("val_data"), c.real("val_fraction"), o);
  } catch (const data::data_error& e) {
    throw config_error(message_of(e));
  }
}

std::unique_ptr<data::Tokenizer> load_tokenizer(const fs::path& file) {
  if (file.extension() == ".json") {
    try {  // ctgrad's character vocabulary or Hugging Face's tokenizer.json, told apart by content
      if (data::is_hf_tokenizer_file(file)) return std::make_unique<data::HfTokenizer>(data::HfTokenizer::load(file));
    } catch (const data::data_error& e) {
      throw config_error(message_of(e));
    }
    return std::make_unique<data::CharTokenizer>(data::CharTokenizer::load(file));
  }
  return std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::load(file));
}

bool is_shard_folder(const std::string& data) {
  std::error_code ec;
  return !data.empty() && fs::is_directory(data, ec) && fs::is_regular_file(fs::path(data) / "tokenize.json", ec);
}

ShardFolder open_shard_folder(const fs::path& dir) {
  const std::string name = "data " + training::printable(dir.string());
  const fs::path manifest = dir / "tokenize.json";
  std::error_code ec;
  if (!fs::is_regular_file(manifest, ec)) throw config_error(name + ": its tokenize.json is not a file");
  std::ifstream in(manifest);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  auto damaged = [&](const std::string& why) { return config_error(name + ": its tokenize.json is not ctgrad data tokenize's (" + why + ")"); };
  if (j.is_discarded() || !j.is_object()) throw damaged("not a JSON object");
  if (!j.contains("complete") || !j["complete"].is_boolean()) throw damaged("no \"complete\"");
  if (!j["complete"].get<bool>()) throw config_error(name + ": its tokenization did not finish: run the same ctgrad data tokenize again to complete it");
  if (!j.contains("tokenizer") || !j["tokenizer"].is_string() || (j["tokenizer"] != "tokenizer.model" && j["tokenizer"] != "tokenizer.json"))
    throw damaged("its tokenizer is not tokenizer.model or tokenizer.json");
  ShardFolder f{dir, dir / j["tokenizer"].get<std::string>()};
  for (const char* split : {"train", "val"}) {
    if (!j.contains(split) || !j[split].is_object() || !j[split].contains("shards") || !j[split]["shards"].is_number_unsigned())
      throw damaged(std::string("no count of ") + split + " shards");
    (std::string(split) == "train" ? f.train_shards : f.val_shards) = j[split]["shards"].get<std::size_t>();
  }
  if (!fs::is_regular_file(f.tokenizer, ec)) throw config_error(name + ": its tokenizer " + f.tokenizer.filename().string() + " is missing");
  f.vocab_hash = data::file_xxh3(f.tokenizer);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(f.vocab_hash));
  const nlohmann::json& settings = j.contains("settings") && j["settings"].is_object() ? j["settings"] : nlohmann::json::object();
  if (!settings.contains("vocab_hash") || settings["vocab_hash"] != hex)
    throw config_error(name + ": its " + f.tokenizer.filename().string() + " is not the tokenizer the shards were written with (it changed since)");
  return f;
}

std::function<void(Config&)> with_shard_tokenizer(std::function<void(Config&)> then) {
  return [then = std::move(then)](Config& c) {
    if (!c.was_set("tokenizer") && is_shard_folder(c.text("data"))) {
      std::error_code ec;
      c.set("tokenizer", fs::is_regular_file(fs::path(c.text("data")) / "tokenizer.model", ec) ? "bpe" : "char", "the shards' tokenizer");
    }
    if (then) then(c);
  };
}

LmText read_lm_text(const Config& c, bool need_train) {
  const std::string data = c.text("data");
  LmText t;
  if (data == "kjv") {  // one document, its last tenth held out (cut at a line break)
    data::TextSplit s = data::split_text(data::kjv_text());
    t = {"KJV Bible", "the last 10% held out", {std::move(s.train)}, {std::move(s.validation)}};
    return t;
  }
  if (data == "austen") {  // six documents, the last tenth of each held out
    t.name = "Jane Austen's novels", t.split = "the last 10% of each novel held out";
    for (const data::Book& b : data::austen_novels()) {
      data::TextSplit s = data::split_text(b.text);
      t.train.push_back(std::move(s.train)), t.validation.push_back(std::move(s.validation));
    }
    return t;
  }
  data::Corpus corpus = read_user_text(c);
  t.name = data, t.split = corpus.split, t.validation = std::move(corpus.validation);
  if (need_train) t.train = std::move(corpus.train);
  return t;
}

std::vector<data::TokenPiece> TokenSplit::pieces() const {
  std::vector<data::TokenPiece> out;
  if (!shards.empty()) {
    for (const auto& s : shards) out.push_back({.shard = &s, .size = s.header().tokens});
    return out;
  }
  if (joined) return {{.ids = ids.data(), .size = ids.size()}};
  return data::document_pieces(ids, starts);
}

std::uint64_t TokenSplit::tokens() const {
  std::uint64_t n = ids.size();
  for (const auto& s : shards) n += s.header().tokens;
  return n;
}

TokenSplit encode_documents(const data::Tokenizer& tok, std::vector<std::string>&& docs, const data::DataCache& cache, bool joined) {
  TokenSplit out;
  out.joined = joined;
  try {
    if (const auto* sp = dynamic_cast<const data::SentencePieceTokenizer*>(&tok)) {
      std::vector<std::vector<std::int32_t>> ids = sp->encode_all(docs, cache);
      docs.clear();
      std::size_t n = 0;
      for (const auto& d : ids) n += d.size();
      out.ids.reserve(n);
      for (auto& d : ids) {
        out.starts.push_back(out.ids.size());
        out.ids.insert(out.ids.end(), d.begin(), d.end());
        std::vector<std::int32_t>().swap(d);
      }
      return out;
    }
    for (std::string& d : docs) {  // characters: one id per byte, appended as each is encoded
      out.starts.push_back(out.ids.size());
      const std::vector<std::int32_t> ids = tok.encode(d);
      out.ids.insert(out.ids.end(), ids.begin(), ids.end());
      std::string().swap(d);
    }
  } catch (const data::data_error& e) {
    throw config_error("the run's tokenizer cannot encode this text (" + message_of(e) +
                       "): a character tokenizer trained on the KJV has no id for characters it never saw");
  }
  return out;
}

}  // namespace ctgrad::cli
