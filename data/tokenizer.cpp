#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/checkpoint/atomic_file.hpp>

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <sstream>
#include <unordered_map>

namespace ctgrad::data {

CharTokenizer CharTokenizer::train(const std::string& text) {
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
    return t;
  } catch (const std::exception& e) {
    throw data_error("ctgrad: tokenizer file " + path.string() + " is not a character vocabulary: " + e.what());
  }
}

std::vector<std::int32_t> CharTokenizer::encode(const std::string& text) const {
  std::vector<std::int32_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::int32_t id = index_[static_cast<unsigned char>(text[i])];
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
  std::string s(ids.size(), ' ');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw data_error("ctgrad: token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                       " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
    s[i] = char(chars_[std::size_t(ids[i])]);
  }
  return s;
}

void CharTokenizer::save(const std::filesystem::path& path) const {
  nlohmann::json j;
  j["kind"] = "char";
  j["chars"] = std::vector<int>(chars_.begin(), chars_.end());
  try {
    checkpoint::write_atomically(path, j.dump());
  } catch (const std::runtime_error& e) {
    throw data_error(e.what());
  }
}

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
  std::filesystem::path model_file;
};

SentencePieceTokenizer::SentencePieceTokenizer() : impl_(std::make_unique<Impl>()) {}
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

SentencePieceTokenizer SentencePieceTokenizer::train(const std::string& text, const std::filesystem::path& final_prefix,
                                                     SentencePieceOptions o) {
  // Trained under a temporary prefix, then the model moved into place atomically: a tokenizer a
  // run already holds is never half-overwritten.
  std::string tmp_name = ".";
  tmp_name.append(final_prefix.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  const std::filesystem::path prefix = final_prefix.parent_path() / tmp_name;
  const std::string input = prefix.string() + ".train.txt";
  {
    std::ofstream out(input);
    out << text;
    out.flush();
    if (!out) throw data_error("ctgrad: cannot write the SentencePiece training text " + input);
  }
  // Flags as a map, not one command line: a path with a space stays one value.
  std::unordered_map<std::string, std::string> args{
      {"input", input},
      {"model_prefix", prefix.string()},
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
    args["user_defined_symbols"] = list;
  }
  if (o.input_sentence_size > 0) {
    args["input_sentence_size"] = std::to_string(o.input_sentence_size);
    args["shuffle_input_sentence"] = "true";
  }
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(o.seed));  // 0.1.97 has no trainer flag for it
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  std::error_code ec;
  std::filesystem::remove(input, ec);
  std::filesystem::remove(prefix.string() + ".vocab", ec);
  if (!status.ok()) {
    std::filesystem::remove(prefix.string() + ".model", ec);
    throw data_error("ctgrad: SentencePiece training failed: " + status.ToString());
  }
  SentencePieceTokenizer trained = load(prefix.string() + ".model");
  trained.save(final_prefix.string() + ".model");
  std::filesystem::remove(prefix.string() + ".model", ec);
  return load(final_prefix.string() + ".model");
}


SentencePieceTokenizer SentencePieceTokenizer::load(const std::filesystem::path& model_file) {
  SentencePieceTokenizer t;
  const auto status = t.impl_->sp.Load(model_file.string());
  if (!status.ok()) throw data_error("ctgrad: cannot load SentencePiece model " + model_file.string() + ": " + status.ToString());
  t.impl_->model_file = model_file;
  return t;
}

std::vector<std::int32_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = impl_->sp.Encode(text, &ids);
  if (!status.ok()) throw data_error("ctgrad: SentencePiece encode failed: " + status.ToString());
  return std::vector<std::int32_t>(ids.begin(), ids.end());
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
  std::ifstream in(impl_->model_file, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in && !in.eof()) throw data_error("ctgrad: cannot read " + impl_->model_file.string());
  try {
    checkpoint::write_atomically(path, bytes.str());
  } catch (const std::runtime_error& e) {
    throw data_error(e.what());
  }
}

}  // namespace ctgrad::data
