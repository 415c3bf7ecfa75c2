#include <ctgrad/data/hf_tokenizer.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include <unicode/uchar.h>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/checkpoint/safetensors.hpp>

#include "hf_tokenizer_parts.hpp"

namespace ctgrad::data {

using hf::json;

namespace {
constexpr std::size_t kMaxTokenizerBytes = std::size_t(64) << 20;  // Llama 3's is 9 MB, Gemma's 34 MB

struct AddedToken {
  std::string content;
  std::int32_t id;
  bool lstrip, rstrip, single_word, special;
  bool normalized;    // matched in the normalized text (its content normalized too), else in the raw text
  std::string match;  // what is matched: the content, normalized when `normalized`
};

bool word_char(char32_t c) { return u_isalnum(UChar32(c)) || c == '_'; }
bool is_space(char32_t c) { return u_hasBinaryProperty(UChar32(c), UCHAR_WHITE_SPACE); }

// The code point ending before byte `at` (decoded backwards), or the one starting at `at`.
char32_t code_point_before(const std::string& s, std::size_t at, std::size_t* start) {
  std::size_t b = at;
  while (b > 0 && at - b < 4 && (static_cast<unsigned char>(s[b - 1]) & 0xC0) == 0x80) --b;
  b = b > 0 ? b - 1 : 0;
  *start = b;
  const auto cps = hf::code_points(s.substr(b, at - b));
  return cps.empty() ? 0 : cps.back();
}
bool word_char_before(const std::string& s, std::size_t at) {
  std::size_t b;
  return at > 0 && word_char(code_point_before(s, at, &b));
}
bool word_char_after(const std::string& s, std::size_t at) {
  if (at >= s.size()) return false;
  const auto cps = hf::code_points(s.substr(at, 4));
  return !cps.empty() && word_char(cps.front());
}
// Unicode white space before `at` (not past `floor`), after `at`: what lstrip and rstrip take.
std::size_t space_before(const std::string& s, std::size_t at, std::size_t floor) {
  while (at > floor) {
    std::size_t b;
    if (!is_space(code_point_before(s, at, &b)) || b < floor) break;
    at = b;
  }
  return at;
}
std::size_t space_after(const std::string& s, std::size_t at) {
  while (at < s.size()) {
    const auto cps = hf::code_points(s.substr(at, 4));
    if (cps.empty() || !is_space(cps.front())) break;
    at += hf::utf8(cps.front()).size();
  }
  return at;
}
}  // namespace

struct HfTokenizer::Impl {
  std::string text, where;
  std::unique_ptr<hf::Normalizer> normalizer;
  std::unique_ptr<hf::PreTokenizer> pre;
  std::unique_ptr<hf::Model> model;
  std::unique_ptr<hf::Decoder> decoder;
  std::vector<AddedToken> added;  // longest content first (leftmost-longest matching)
  std::map<std::int32_t, const AddedToken*> added_by_id;
  std::array<std::vector<const AddedToken*>, 256> raw_by_byte, normalized_by_byte;  // by the match's first byte, longest first
  std::vector<std::int32_t> prefix_ids, suffix_ids;  // the post-processor's, for one sequence
  std::int32_t size = 0;

  // Appends the ids of normalized text that holds no added token.
  void encode_normalized(const std::string& n, bool first, std::vector<std::int32_t>& out) const {
    if (n.empty()) return;
    if (pre)
      for (const std::string& piece : pre->split(n, first)) model->encode(piece, out);
    else model->encode(n, out);
  }
};

namespace {

// Splits s on the added tokens of `table` as tokenizers' AddedVocabulary: at the leftmost match,
// the longest; a single_word token not standing alone is skipped whole (no shorter token tried
// inside it); lstrip and rstrip take the white space beside it. on_text(begin, end) for the text
// between, on_token(token) for each token.
template <class OnText, class OnToken>
void split_added(const std::string& s, const std::array<std::vector<const AddedToken*>, 256>& table, OnText on_text, OnToken on_token) {
  std::size_t segment = 0, at = 0;
  while (at < s.size()) {
    const AddedToken* hit = nullptr;
    for (const AddedToken* a : table[static_cast<unsigned char>(s[at])])
      if (s.compare(at, a->match.size(), a->match) == 0) {
        hit = a;
        break;
      }
    if (!hit) {
      ++at;
      continue;
    }
    if (hit->single_word && (word_char_before(s, at) || word_char_after(s, at + hit->match.size()))) {
      at += hit->match.size();
      continue;
    }
    std::size_t begin = at, end = at + hit->match.size();
    if (hit->lstrip) begin = space_before(s, begin, segment);
    if (hit->rstrip) end = space_after(s, end);
    on_text(segment, begin);
    on_token(*hit);
    segment = at = end;
  }
  on_text(segment, s.size());
}

}  // namespace

namespace {

void read_post_processor(HfTokenizer::Impl& t, const json& p, const std::string& where) {
  if (p.is_null()) return;
  if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) hf::refuse(where, "the post_processor has no type");
  const std::string type = p["type"].get<std::string>();
  const std::string at = where + ": post_processor " + type;
  auto pair_id = [&](const char* key) {
    if (!p.contains(key) || !p[key].is_array() || p[key].size() != 2 || !p[key][1].is_number_integer()) hf::refuse(at, std::string("'") + key + "' is not [token, id]");
    return std::int32_t(p[key][1].get<std::int64_t>());
  };
  if (type == "ByteLevel") return;
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    t.prefix_ids.push_back(pair_id("cls")), t.suffix_ids.insert(t.suffix_ids.begin(), pair_id("sep"));
    return;
  }
  if (type == "TemplateProcessing") {
    if (!p.contains("single") || !p["single"].is_array()) hf::refuse(at, "'single' is not a list");
    const json& specials = hf::field(p, "special_tokens");
    bool seen_sequence = false;
    for (const json& item : p["single"]) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id") || !item["SpecialToken"]["id"].is_string())
        hf::refuse(at, "an item of 'single' is neither a Sequence nor a SpecialToken");
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      if (!specials.is_object() || !specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
        hf::refuse(at, "special token '" + name.substr(0, 40) + "' is not in special_tokens");
      for (const json& id : specials[name]["ids"]) {
        if (!id.is_number_integer()) hf::refuse(at, "an id of '" + name.substr(0, 40) + "' is not an integer");
        (seen_sequence ? t.suffix_ids : t.prefix_ids).push_back(std::int32_t(id.get<std::int64_t>()));
      }
    }
    return;
  }
  if (type == "Sequence") {
    if (!p.contains("processors") || !p["processors"].is_array()) hf::refuse(at, "'processors' is not a list");
    for (const json& q : p["processors"]) read_post_processor(t, q, where);
    return;
  }
  hf::refuse(where, "post_processor '" + type + "' is not supported");
}

}  // namespace

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::HfTokenizer(HfTokenizer&&) noexcept = default;
HfTokenizer& HfTokenizer::operator=(HfTokenizer&&) noexcept = default;
HfTokenizer::~HfTokenizer() = default;

HfTokenizer HfTokenizer::load(const std::filesystem::path& path) {
  std::vector<std::byte> bytes;
  try {
    bytes = checkpoint::read_regular_file(path, "ctgrad: tokenizer " + path.string(), kMaxTokenizerBytes);
  } catch (const checkpoint::format_error& e) {
    throw data_error(e.what());
  }
  return parse(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
}

HfTokenizer HfTokenizer::parse(const std::string& text, const std::string& where) {
  auto t = std::make_unique<Impl>();
  t->text = text, t->where = where;
  if (checkpoint::json_nesting(text) > 64) hf::refuse(where, "its JSON nests deeper than 64 levels");
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    hf::refuse(where, std::string("not JSON: ") + std::string(e.what()).substr(0, 200));
  }
  if (!j.is_object() || !j.contains("model")) hf::refuse(where, "not a Hugging Face tokenizer.json (no \"model\")");
  t->normalizer = hf::make_normalizer(hf::field(j, "normalizer"), where);
  t->pre = hf::make_pre_tokenizer(hf::field(j, "pre_tokenizer"), where);
  t->model = hf::make_model(j["model"], where);
  t->decoder = hf::make_decoder(hf::field(j, "decoder"), where);
  t->size = std::int32_t(t->model->tokens.size());
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) hf::refuse(where, "'added_tokens' is not a list");
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") || !a["content"].is_string() ||
          a["content"].get<std::string>().empty())
        hf::refuse(where, "an added token lacks an integer id or a non-empty content");
      const std::int64_t id = a["id"].get<std::int64_t>();
      if (id < 0 || id >= (std::int64_t(1) << 24)) hf::refuse(where, "added token id " + std::to_string(id) + " is outside [0, 2^24)");
      auto flag = [&](const char* k) { return a.contains(k) && a[k].is_boolean() && a[k].get<bool>(); };
      const std::string content = a["content"].get<std::string>();
      const bool special = flag("special"), normalized = a.contains("normalized") && a["normalized"].is_boolean() ? a["normalized"].get<bool>() : !special;
      const bool by_normalized = normalized && t->normalizer;
      std::string match = by_normalized ? t->normalizer->apply(content) : content;
      if (match.empty()) match = content;  // a token the normalizer erases is matched as written
      t->added.push_back({content, std::int32_t(id), flag("lstrip"), flag("rstrip"), flag("single_word"), special, by_normalized, match});
      t->size = std::max(t->size, std::int32_t(id + 1));
    }
  }
  std::stable_sort(t->added.begin(), t->added.end(), [](const AddedToken& a, const AddedToken& b) { return a.match.size() > b.match.size(); });
  for (const AddedToken& a : t->added) {
    t->added_by_id[a.id] = &a;
    (a.normalized ? t->normalized_by_byte : t->raw_by_byte)[static_cast<unsigned char>(a.match[0])].push_back(&a);
  }
  read_post_processor(*t, hf::field(j, "post_processor"), where);
  for (std::int32_t id : t->prefix_ids) if (id < 0 || id >= t->size) hf::refuse(where, "the post_processor's id " + std::to_string(id) + " is out of the vocabulary");
  for (std::int32_t id : t->suffix_ids) if (id < 0 || id >= t->size) hf::refuse(where, "the post_processor's id " + std::to_string(id) + " is out of the vocabulary");
  return HfTokenizer(std::move(t));
}

std::vector<std::int32_t> HfTokenizer::encode(const std::string& text, bool add_special_tokens) const {
  const Impl& t = *impl_;
  std::vector<std::int32_t> out;
  if (add_special_tokens) out = t.prefix_ids;
  // The raw text split on the added tokens matched as written; each part between normalized, then
  // split on those matched in normalized text; the rest through the pre-tokenizer and the model.
  const auto token = [&](const AddedToken& a) { out.push_back(a.id); };
  split_added(text, t.raw_by_byte, [&](std::size_t b, std::size_t e) {
    if (b == e) return;
    const std::string raw = text.substr(b, e - b), n = t.normalizer ? t.normalizer->apply(raw) : raw;
    split_added(n, t.normalized_by_byte, [&](std::size_t nb, std::size_t ne) { t.encode_normalized(n.substr(nb, ne - nb), b == 0 && nb == 0, out); }, token);
  }, token);
  if (add_special_tokens) out.insert(out.end(), t.suffix_ids.begin(), t.suffix_ids.end());
  return out;
}

std::string HfTokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::vector<std::string> tokens;
  for (std::int32_t id : ids) {
    if (id < 0 || id >= t.size) throw data_error("ctgrad: tokenizer " + t.where + ": id " + std::to_string(id) + " is outside [0, " + std::to_string(t.size) + ")");
    const auto a = t.added_by_id.find(id);
    if (a != t.added_by_id.end()) {
      if (!(skip_special_tokens && a->second->special)) tokens.push_back(a->second->content);
      continue;
    }
    if (std::size_t(id) < t.model->tokens.size() && !t.model->tokens[std::size_t(id)].empty()) tokens.push_back(t.model->tokens[std::size_t(id)]);
  }
  if (!t.decoder) {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  std::string out;
  for (const std::string& piece : t.decoder->decode(std::move(tokens))) out += piece;
  return out;
}

std::int32_t HfTokenizer::vocab_size() const { return impl_->size; }

void HfTokenizer::save(const std::filesystem::path& path) const { checkpoint::write_atomically(path, impl_->text); }

std::int32_t HfTokenizer::token_id(const std::string& token) const {
  for (const AddedToken& a : impl_->added)
    if (a.content == token) return a.id;
  const auto it = impl_->model->vocab.find(token);
  return it == impl_->model->vocab.end() ? -1 : it->second;
}

std::string HfTokenizer::normalize(const std::string& text) const {
  const std::string valid = hf::lossy_utf8(text);
  return impl_->normalizer ? impl_->normalizer->apply(valid) : valid;
}

std::string HfTokenizer::token(std::int32_t id) const {
  const Impl& t = *impl_;
  if (const auto a = t.added_by_id.find(id); a != t.added_by_id.end()) return a->second->content;
  return id >= 0 && std::size_t(id) < t.model->tokens.size() ? t.model->tokens[std::size_t(id)] : std::string();
}

const std::string& HfTokenizer::model_type() const { return impl_->model->type; }

const std::vector<std::int32_t>& HfTokenizer::special_prefix() const { return impl_->prefix_ids; }

bool is_hf_tokenizer_file(const std::filesystem::path& path) {
  try {
    const auto bytes = checkpoint::read_regular_file(path, path.string(), kMaxTokenizerBytes);
    const json j = json::parse(reinterpret_cast<const char*>(bytes.data()), reinterpret_cast<const char*>(bytes.data()) + bytes.size());
    return j.is_object() && j.contains("model");
  } catch (const std::exception&) {
    return false;  // not readable or not JSON: not Hugging Face's (its loader says why)
  }
}

}  // namespace ctgrad::data
