#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/checkpoint/atomic_file.hpp>

#include <dlfcn.h>
#include <sys/stat.h>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace ctgrad::data {

CharTokenizer CharTokenizer::train(const std::string& text, bool unknown) {
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  CharTokenizer t;
  for (int i = 0; i < 256; ++i) t.index_[i] = -1;
  for (int c = 0; c < 256; ++c)
    if (seen[c]) {
      t.index_[c] = std::int32_t(t.chars_.size());
      t.chars_.push_back(static_cast<unsigned char>(c));
    }
  if (t.chars_.empty()) throw data_error("ctgrad: cannot build a character vocabulary from empty text");
  t.unknown_ = unknown;
  return t;
}

CharTokenizer CharTokenizer::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw data_error("ctgrad: cannot open tokenizer file " + path.string());
  nlohmann::json j;
  try {
    in >> j;
    CharTokenizer t;
    for (int i = 0; i < 256; ++i) t.index_[i] = -1;
    for (int c : j.at("chars").get<std::vector<int>>()) {
      if (c < 0 || c > 255 || t.index_[c] >= 0) throw data_error("bad or repeated byte " + std::to_string(c));
      t.index_[c] = std::int32_t(t.chars_.size());
      t.chars_.push_back(static_cast<unsigned char>(c));
    }
    t.unknown_ = j.value("unknown", false);
    return t;
  } catch (const std::exception& e) {
    throw data_error("ctgrad: tokenizer file " + path.string() + " is not a character vocabulary: " + e.what());
  }
}

std::vector<std::int32_t> CharTokenizer::encode(const std::string& text) const {
  std::vector<std::int32_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::int32_t id = index_[static_cast<unsigned char>(text[i])];
    if (id < 0 && unknown_) {
      ids[i] = std::int32_t(chars_.size());
      continue;
    }
    if (id < 0) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      std::ostringstream msg;
      msg << "ctgrad: character ";
      if (c >= 32 && c < 127) msg << "'" << char(c) << "' ";
      msg << "(byte " << int(c) << ") at position " << i << " is not in the vocabulary of " << chars_.size() << " characters";
      throw data_error(msg.str());
    }
    ids[i] = id;
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::string s;
  s.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw data_error("ctgrad: token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                       " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
    if (std::size_t(ids[i]) == chars_.size()) s += "\xEF\xBF\xBD";  // the unknown id: U+FFFD
    else s += char(chars_[std::size_t(ids[i])]);
  }
  return s;
}

void CharTokenizer::save(const std::filesystem::path& path) const {
  nlohmann::json j;
  j["kind"] = "char";
  j["chars"] = std::vector<int>(chars_.begin(), chars_.end());
  if (unknown_) j["unknown"] = true;
  try {
    checkpoint::write_atomically(path, j.dump());
  } catch (const std::runtime_error& e) {
    throw data_error(e.what());
  }
}

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
  std::filesystem::path model_file;
  std::string model_hash;  // of the model's bytes, for cache keys
};

namespace {

#ifndef CTGRAD_SENTENCEPIECE_VERSION
#define CTGRAD_SENTENCEPIECE_VERSION "unknown"
#endif

// The SentencePiece library this process runs: its version when ctgrad was built, and its file's
// size and time, so that an upgrade of the library under the same version is a cache miss too.
std::string sentencepiece_identity() {
  std::string id = CTGRAD_SENTENCEPIECE_VERSION;
  using TrainFn = sentencepiece::util::Status (*)(const std::unordered_map<std::string, std::string>&, sentencepiece::SentenceIterator*,
                                                  std::string*);
  for (void* symbol : {reinterpret_cast<void*>(&sentencepiece::SetRandomGeneratorSeed),  // libsentencepiece
                       reinterpret_cast<void*>(static_cast<TrainFn>(&sentencepiece::SentencePieceTrainer::Train))}) {  // its trainer
    Dl_info info{};
    struct stat st{};
    if (::dladdr(symbol, &info) && info.dli_fname && ::stat(info.dli_fname, &st) == 0)
      id += " " + std::string(info.dli_fname) + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
            std::to_string(st.st_mtim.tv_nsec);
  }
  return id;
}

// The training text's lines, for SentencePiece's trainer.
class Lines : public sentencepiece::SentenceIterator {
 public:
  explicit Lines(const std::string& text) : text_(text) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    if (pos_ >= text_.size()) {
      done_ = true;
      return;
    }
    const std::size_t end = std::min(text_.find('\n', pos_), text_.size());
    line_.assign(text_, pos_, end - pos_);
    pos_ = end + 1;
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::string& text_;
  std::size_t pos_ = 0;
  std::string line_;
  bool done_ = false;
};

std::string read_file(const std::filesystem::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in && !in.eof()) throw data_error("ctgrad: cannot read " + f.string());
  return std::move(bytes).str();
}

// Written atomically: a model a run holds is never half-overwritten.
void write_model(const std::filesystem::path& path, const std::string& bytes) {
  try {
    checkpoint::write_atomically(path, bytes);
  } catch (const std::runtime_error& e) {
    throw data_error(e.what());
  }
}

// An encoded corpus in the cache: n, then n + 1 offsets (int64), then the ids (int32).
std::string serialize_ids(const std::vector<std::vector<std::int32_t>>& ids) {
  std::size_t total = 0;
  for (const auto& v : ids) total += v.size();
  std::string out(8 * (ids.size() + 2) + 4 * total, '\0');
  char* p = out.data();
  const std::int64_t n = std::int64_t(ids.size());
  std::memcpy(p, &n, 8), p += 8;
  std::int64_t off = 0;
  for (std::size_t i = 0; i <= ids.size(); ++i) {
    std::memcpy(p, &off, 8), p += 8;
    if (i < ids.size()) off += std::int64_t(ids[i].size());
  }
  for (const auto& v : ids)
    if (!v.empty()) std::memcpy(p, v.data(), 4 * v.size()), p += 4 * v.size();  // an empty text's data() may be null
  return out;
}
std::optional<std::vector<std::vector<std::int32_t>>> parse_ids(std::string_view b, std::size_t n_texts, std::int32_t vocab) {
  if (b.size() < 16) return std::nullopt;
  std::int64_t n = 0;
  std::memcpy(&n, b.data(), 8);
  if (n != std::int64_t(n_texts) || b.size() < 8 * (n_texts + 2)) return std::nullopt;
  const char* offs = b.data() + 8;
  const char* data = offs + 8 * (n_texts + 1);
  const std::size_t n_ids = (b.size() - 8 * (n_texts + 2)) / 4;
  std::vector<std::vector<std::int32_t>> out(n_texts);
  std::int64_t prev = 0;
  for (std::size_t i = 0; i < n_texts; ++i) {
    std::int64_t a = 0, e = 0;
    std::memcpy(&a, offs + 8 * i, 8), std::memcpy(&e, offs + 8 * (i + 1), 8);
    if (a != prev || e < a || std::size_t(e) > n_ids) return std::nullopt;
    out[i].resize(std::size_t(e - a));
    if (e > a) std::memcpy(out[i].data(), data + 4 * a, 4 * std::size_t(e - a));
    for (std::int32_t t : out[i])
      if (t < 0 || t >= vocab) return std::nullopt;
    prev = e;
  }
  if (std::size_t(prev) != n_ids || b.size() != 8 * (n_texts + 2) + 4 * n_ids) return std::nullopt;
  return out;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer() : impl_(std::make_unique<Impl>()) {}
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

SentencePieceTokenizer SentencePieceTokenizer::train(const std::string& text, const std::filesystem::path& final_prefix,
                                                     SentencePieceOptions o, const DataCache& cache) {
  // Flags as a map, not one command line: a value with a space stays one value. The text comes
  // line by line from memory and the model back as bytes: no temporary files, and the model
  // records no paths (its bytes depend on the text and the flags alone).
  std::map<std::string, std::string> flags{
      {"vocab_size", std::to_string(o.vocab_size)},
      {"model_type", o.model_type},
      {"character_coverage", "1.0"},
      {"minloglevel", "2"},
      {"unk_id", std::to_string(o.unk_id)},
      {"bos_id", std::to_string(o.bos_id)},
      {"eos_id", std::to_string(o.eos_id)},
      {"pad_id", std::to_string(o.pad_id)},
      {"unk_piece", o.unk_piece},
      {"pad_piece", o.pad_piece},
      {"num_threads", "1"}};
  if (!o.user_defined_symbols.empty()) {
    std::string list;
    for (const auto& u : o.user_defined_symbols) list += (list.empty() ? "" : ",") + u;
    flags["user_defined_symbols"] = list;
  }
  if (o.max_sentence_length > 0) flags["max_sentence_length"] = std::to_string(o.max_sentence_length);
  if (o.input_sentence_size > 0) {
    flags["input_sentence_size"] = std::to_string(o.input_sentence_size);
    flags["shuffle_input_sentence"] = "true";
  }
  const std::filesystem::path model_file = final_prefix.string() + ".model";
  CacheKey key("sentencepiece-model 2");
  if (cache.enabled()) {
    key.add(sentencepiece_identity()).add(std::int64_t(o.seed)).add(std::int64_t(flags.size()));
    for (const auto& [k, v] : flags) key.add(k).add(v);
    key.add(text);
    if (const auto model = cache.read(key, "sentencepiece-model"))
      if (sentencepiece::SentencePieceProcessor check; check.LoadFromSerializedProto(*model).ok()) {  // else trained and replaced
        write_model(model_file, *model);
        return load(model_file);
      }
  }
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(o.seed));  // 0.1.97 has no trainer flag for it
  Lines lines(text);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train({flags.begin(), flags.end()}, &lines, &model);
  if (!status.ok()) {
    // "Vocabulary size too high (N). Please set it to a value <= M.": the text has too few distinct pieces.
    const std::string m = status.ToString();
    if (const std::size_t at = m.find("Please set it to a value <= "); at != std::string::npos)
      throw data_error("ctgrad: the training text has too few distinct pieces for a SentencePiece vocabulary of " + std::to_string(o.vocab_size) +
                       ": at most " + m.substr(at + 28, m.find_first_not_of("0123456789", at + 28) - at - 28) + " (a smaller vocab, or more text)");
    throw data_error("ctgrad: SentencePiece training failed: " + m);
  }
  write_model(model_file, model);
  SentencePieceTokenizer out = load(model_file);
  cache.write(key, "sentencepiece-model", model);
  return out;
}

SentencePieceTokenizer SentencePieceTokenizer::load(const std::filesystem::path& model_file) {
  SentencePieceTokenizer t;
  std::string bytes;
  try {
    bytes = read_file(model_file);  // once: the model loaded and the hash its cache keys use are of the same bytes
  } catch (const data_error&) {
    throw data_error("ctgrad: cannot load SentencePiece model " + model_file.string() + ": it cannot be read");
  }
  const auto status = t.impl_->sp.LoadFromSerializedProto(bytes);
  if (!status.ok()) throw data_error("ctgrad: cannot load SentencePiece model " + model_file.string() + ": " + status.ToString());
  t.impl_->model_file = model_file;
  t.impl_->model_hash = CacheKey("sentencepiece model file").add(bytes).hex();
  return t;
}

std::vector<std::int32_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = impl_->sp.Encode(text, &ids);
  if (!status.ok()) throw data_error("ctgrad: SentencePiece encode failed: " + status.ToString());
  return std::vector<std::int32_t>(ids.begin(), ids.end());
}

std::vector<std::vector<std::int32_t>> SentencePieceTokenizer::encode_all(std::span<const std::string> texts, const DataCache& cache) const {
  CacheKey key("sentencepiece-ids 1");
  if (cache.enabled()) {
    key.add(sentencepiece_identity()).add(impl_->model_hash).add(std::int64_t(texts.size()));
    for (const std::string& t : texts) key.add(t);
    if (const auto hit = cache.read(key, "sentencepiece-ids"))
      if (auto ids = parse_ids(*hit, texts.size(), vocab_size())) return std::move(*ids);
  }
  std::vector<std::vector<std::int32_t>> out(texts.size());
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, texts.size(), 64), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t i = r.begin(); i != r.end(); ++i) out[i] = encode(texts[i]);
  });
  if (cache.enabled()) cache.write(key, "sentencepiece-ids", serialize_ids(out));
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw data_error("ctgrad: token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                       " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
  std::string out;
  const auto status = impl_->sp.Decode(std::vector<int>(ids.begin(), ids.end()), &out);
  if (!status.ok()) throw data_error("ctgrad: SentencePiece decode failed: " + status.ToString());
  return out;
}

std::int32_t SentencePieceTokenizer::vocab_size() const { return std::int32_t(impl_->sp.GetPieceSize()); }
std::int32_t SentencePieceTokenizer::bos_id() const { return std::int32_t(impl_->sp.bos_id()); }
std::int32_t SentencePieceTokenizer::eos_id() const { return std::int32_t(impl_->sp.eos_id()); }
std::int32_t SentencePieceTokenizer::pad_id() const { return std::int32_t(impl_->sp.pad_id()); }
std::string SentencePieceTokenizer::piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) throw data_error("ctgrad: token id " + std::to_string(id) + " is outside the vocabulary");
  return impl_->sp.IdToPiece(id);
}
std::int32_t SentencePieceTokenizer::piece_id(const std::string& piece) const {
  const int id = impl_->sp.PieceToId(piece);
  return id == impl_->sp.unk_id() && piece != impl_->sp.IdToPiece(id) ? -1 : std::int32_t(id);
}
bool SentencePieceTokenizer::starts_word(std::int32_t id) const { return piece(id).rfind("\xe2\x96\x81", 0) == 0; }

void SentencePieceTokenizer::save(const std::filesystem::path& path) const {
  if (std::filesystem::exists(path) && std::filesystem::equivalent(impl_->model_file, path)) return;
  write_model(path, read_file(impl_->model_file));
}

}  // namespace ctgrad::data
