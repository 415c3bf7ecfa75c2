// The models (BPE, WordPiece, Unigram, WordLevel) and decoders of a Hugging Face tokenizer.json,
// as the `tokenizers` library computes them.
#include "hf_tokenizer_parts.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include <ctgrad/data/text.hpp>

#include <unicode/uchar.h>

namespace ctgrad::data::hf {

namespace {

// Ids past this are refused: the largest vocabularies are about 2^18 (Gemma's 256k).
constexpr std::int64_t kMaxId = std::int64_t(1) << 24;

// A {"token": id} vocabulary: ids in [0, 2^31), each once.
void read_vocab(Model& m, const json& v, const std::string& where) {
  if (!v.is_object()) refuse(where, "'vocab' is not an object of tokens and ids");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() >= kMaxId)
      refuse(where, "the id of token '" + it.key().substr(0, 40) + "' is not an integer in [0, 2^24)");
    const auto id = std::int32_t(it->get<std::int64_t>());
    if (std::size_t(id) >= m.tokens.size()) m.tokens.resize(std::size_t(id) + 1);
    if (!m.tokens[std::size_t(id)].empty()) refuse(where, "id " + std::to_string(id) + " is given to two tokens");
    m.tokens[std::size_t(id)] = it.key();
    m.vocab.emplace(it.key(), id);
  }
  if (m.vocab.empty()) refuse(where, "the vocabulary is empty");
}

std::int32_t find(const Model& m, const std::string& t) {
  const auto it = m.vocab.find(t);
  return it == m.vocab.end() ? -1 : it->second;
}

std::string byte_token(unsigned char b) {
  static const char* hex = "0123456789ABCDEF";
  return std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
}

struct Bpe : Model {
  std::map<std::pair<std::int32_t, std::int32_t>, std::pair<std::int32_t, std::int32_t>> merges;  // (a, b) -> (rank, merged id)
  std::int32_t unk = -1;
  std::string prefix, suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  void encode(const std::string& piece, std::vector<std::int32_t>& out) const override {
    if (ignore_merges)
      if (const std::int32_t id = find(*this, piece); id >= 0) return out.push_back(id);
    std::vector<std::int32_t> sym;
    const std::vector<char32_t> cps = code_points(piece);
    bool last_unk = false;
    for (std::size_t i = 0; i < cps.size(); ++i) {
      std::string s = utf8(cps[i]);
      if (i > 0) s = prefix + s;
      if (i + 1 == cps.size()) s += suffix;
      if (const std::int32_t id = find(*this, s); id >= 0) {
        sym.push_back(id), last_unk = false;
        continue;
      }
      if (byte_fallback) {
        const std::string raw = utf8(cps[i]);
        std::vector<std::int32_t> bytes;
        for (unsigned char b : raw)
          if (const std::int32_t id = find(*this, byte_token(b)); id >= 0) bytes.push_back(id);
        if (bytes.size() == raw.size()) {
          sym.insert(sym.end(), bytes.begin(), bytes.end()), last_unk = false;
          continue;
        }
      }
      if (unk >= 0) {
        if (!(fuse_unk && last_unk)) sym.push_back(unk);
        last_unk = true;
      }
    }
    merge_all(sym);
    out.insert(out.end(), sym.begin(), sym.end());
  }

  // Merges the lowest-ranked adjacent pair first, the leftmost of equals, until none merges: a
  // heap of candidate pairs over a linked list of symbols (as the tokenizers library's Word), so a
  // long word (SentencePiece's whole-sentence BPE) costs n log n, not n^2.
  void merge_all(std::vector<std::int32_t>& sym) const {
    const std::size_t n = sym.size();
    if (n < 2) return;
    std::vector<std::int64_t> prev(n), next(n);
    std::vector<bool> alive(n, true);
    for (std::size_t i = 0; i < n; ++i) prev[i] = std::int64_t(i) - 1, next[i] = i + 1 < n ? std::int64_t(i + 1) : -1;
    struct Candidate {
      std::int32_t rank;
      std::int64_t pos;
      std::int32_t left, right;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto consider = [&](std::int64_t i) {
      if (i < 0 || next[std::size_t(i)] < 0) return;
      const std::int32_t a = sym[std::size_t(i)], b = sym[std::size_t(next[std::size_t(i)])];
      const auto it = merges.find({a, b});
      if (it != merges.end()) heap.push({it->second.first, i, a, b});
    };
    for (std::size_t i = 0; i + 1 < n; ++i) consider(std::int64_t(i));
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      const auto i = std::size_t(c.pos);
      if (!alive[i] || next[i] < 0 || sym[i] != c.left || sym[std::size_t(next[i])] != c.right) continue;  // stale
      const auto j = std::size_t(next[i]);
      sym[i] = merges.at({c.left, c.right}).second;
      alive[j] = false;
      next[i] = next[j];
      if (next[i] >= 0) prev[std::size_t(next[i])] = std::int64_t(i);
      consider(prev[i]);
      consider(std::int64_t(i));
    }
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (alive[i]) sym[k++] = sym[i];
    sym.resize(k);
  }
};

struct WordPiece : Model {
  std::int32_t unk = -1;
  std::string prefix = "##";
  std::size_t max_chars = 100;
  void encode(const std::string& piece, std::vector<std::int32_t>& out) const override {
    const std::vector<char32_t> cps = code_points(piece);
    if (cps.size() > max_chars) return out.push_back(unk);
    std::vector<std::int32_t> ids;
    for (std::size_t start = 0; start < cps.size();) {
      std::int32_t found = -1;
      std::size_t end = cps.size();
      for (; end > start; --end) {
        std::string s = start > 0 ? prefix : "";
        for (std::size_t k = start; k < end; ++k) s += utf8(cps[k]);
        if ((found = find(*this, s)) >= 0) break;
      }
      if (found < 0) return out.push_back(unk);
      ids.push_back(found), start = end;
    }
    out.insert(out.end(), ids.begin(), ids.end());
  }
};

struct Unigram : Model {
  std::vector<double> score;
  std::int32_t unk = -1;
  double unk_score = 0;
  bool byte_fallback = false;
  std::size_t longest = 1;  // code points of the longest piece
  void encode(const std::string& piece, std::vector<std::int32_t>& out) const override {
    const std::vector<char32_t> cps = code_points(piece);
    const std::size_t n = cps.size();
    std::vector<std::string> ch(n);
    for (std::size_t i = 0; i < n; ++i) ch[i] = utf8(cps[i]);
    const double none = -std::numeric_limits<double>::infinity();
    std::vector<double> best(n + 1, none);
    std::vector<std::int64_t> from(n + 1, -1), id_at(n + 1, -1);
    best[0] = 0;
    for (std::size_t b = 0; b < n; ++b) {
      if (best[b] == none) continue;
      std::string s;
      bool single = false;
      for (std::size_t e = b + 1; e <= std::min(n, b + longest); ++e) {
        s += ch[e - 1];
        const auto it = vocab.lower_bound(s);
        if (it == vocab.end() || it->first.compare(0, s.size(), s) != 0) break;  // no piece starts so: none longer either
        if (it->first != s) continue;
        const std::int32_t id = it->second;
        single = single || e == b + 1;
        const double v = best[b] + score[std::size_t(id)];
        if (v > best[e]) best[e] = v, from[e] = std::int64_t(b), id_at[e] = id;
      }
      if (!single && unk >= 0 && best[b] + unk_score > best[b + 1]) best[b + 1] = best[b] + unk_score, from[b + 1] = std::int64_t(b), id_at[b + 1] = unk;
    }
    if (n == 0) return;
    if (best[n] == none)  // as tokenizers' MissingUnkId
      throw data_error("ctgrad: tokenizer: the Unigram vocabulary cannot encode '" + piece.substr(0, 40) + "' and has no unk_id");
    std::vector<std::pair<std::int32_t, std::string>> path;
    for (std::size_t e = n; e > 0; e = std::size_t(from[e])) {
      std::string s;
      for (std::size_t k = std::size_t(from[e]); k < e; ++k) s += ch[k];
      path.emplace_back(std::int32_t(id_at[e]), s);
    }
    std::reverse(path.begin(), path.end());
    bool last_unk = false;
    for (const auto& [id, text] : path) {
      if (id == unk && byte_fallback) {
        std::vector<std::int32_t> bytes;
        for (unsigned char b : text)
          if (const std::int32_t t = find(*this, byte_token(b)); t >= 0) bytes.push_back(t);
        if (bytes.size() == text.size()) {
          out.insert(out.end(), bytes.begin(), bytes.end()), last_unk = false;
          continue;
        }
      }
      if (id == unk && last_unk) continue;  // consecutive unknowns: one
      out.push_back(id), last_unk = id == unk;
    }
  }
};

struct WordLevel : Model {
  std::int32_t unk = -1;
  void encode(const std::string& piece, std::vector<std::int32_t>& out) const override {
    const std::int32_t id = find(*this, piece);
    if (id >= 0) out.push_back(id);
    else if (unk >= 0) out.push_back(unk);
    else throw data_error("ctgrad: tokenizer: the WordLevel vocabulary lacks '" + piece.substr(0, 40) + "' and has no unk_token");  // MissingUnkToken
  }
};

std::int32_t unk_of(const Model& m, const json& j, const std::string& where, bool required) {
  const std::string u = text_field(j, "unk_token", where);
  if (u.empty()) {
    if (required) refuse(where, "'unk_token' is missing");
    return -1;
  }
  const std::int32_t id = find(m, u);
  if (id < 0) refuse(where, "unk_token '" + u.substr(0, 40) + "' is not in the vocabulary");
  return id;
}

}  // namespace

std::unique_ptr<Model> make_model(const json& j, const std::string& where) {
  if (!j.is_object()) refuse(where, "'model' is not an object");
  const std::string type = text_field(j, "type", where, j.contains("merges") ? "BPE" : "");
  const std::string at = where + ": model " + type;
  std::unique_ptr<Model> m;
  if (type == "BPE") {
    auto b = std::make_unique<Bpe>();
    read_vocab(*b, field(j, "vocab"), at);
    if (j.contains("dropout") && !j["dropout"].is_null() && j["dropout"].is_number() && j["dropout"].get<double>() > 0)
      refuse(at, "BPE dropout is not supported (it samples a different split each time)");
    b->unk = unk_of(*b, j, at, false);
    b->prefix = text_field(j, "continuing_subword_prefix", at), b->suffix = text_field(j, "end_of_word_suffix", at);
    b->fuse_unk = flag_field(j, "fuse_unk", at, false), b->byte_fallback = flag_field(j, "byte_fallback", at, false);
    b->ignore_merges = flag_field(j, "ignore_merges", at, false);
    if (!j.contains("merges") || !j["merges"].is_array()) refuse(at, "'merges' is not a list");
    std::int32_t rank = 0;
    for (const json& mg : j["merges"]) {
      std::string a, c;
      if (mg.is_string()) {
        const std::string s = mg.get<std::string>();
        const std::size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
          refuse(at, "merge " + std::to_string(rank) + " '" + s.substr(0, 60) + "' is not two tokens separated by one space");
        a = s.substr(0, space), c = s.substr(space + 1);
      } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
        a = mg[0].get<std::string>(), c = mg[1].get<std::string>();
      } else {
        refuse(at, "merge " + std::to_string(rank) + " is not \"a b\" or [\"a\", \"b\"]");
      }
      // The merged token: a then b without its continuing-subword prefix (as tokenizers' BPE).
      const std::string joined = a + (!b->prefix.empty() && c.rfind(b->prefix, 0) == 0 ? c.substr(b->prefix.size()) : c);
      const std::int32_t ia = find(*b, a), ic = find(*b, c), merged = find(*b, joined);
      if (ia < 0 || ic < 0 || merged < 0)
        refuse(at, "merge " + std::to_string(rank) + " ('" + a.substr(0, 30) + "' + '" + c.substr(0, 30) + "') names " +
                       (ia < 0 ? "'" + a.substr(0, 30) + "'" : ic < 0 ? "'" + c.substr(0, 30) + "'" : "'" + joined.substr(0, 60) + "'") +
                       ", which the vocabulary lacks");
      b->merges.insert_or_assign(std::pair{ia, ic}, std::pair{rank, merged});  // a repeated pair: the last rank, as tokenizers' map
      ++rank;
    }
    m = std::move(b);
  } else if (type == "WordPiece") {
    auto w = std::make_unique<WordPiece>();
    read_vocab(*w, field(j, "vocab"), at);
    w->unk = unk_of(*w, j, at, true);
    w->prefix = text_field(j, "continuing_subword_prefix", at, "##");
    if (j.contains("max_input_chars_per_word") && j["max_input_chars_per_word"].is_number_unsigned())
      w->max_chars = j["max_input_chars_per_word"].get<std::size_t>();
    if (w->max_chars > 10000) refuse(at, "max_input_chars_per_word " + std::to_string(w->max_chars) + " is over 10000 (a word's cost grows with its cube)");
    m = std::move(w);
  } else if (type == "Unigram") {
    auto u = std::make_unique<Unigram>();
    if (!j.contains("vocab") || !j["vocab"].is_array() || j["vocab"].empty()) refuse(at, "'vocab' is not a list of [piece, score]");
    double lowest = std::numeric_limits<double>::infinity();
    for (const json& e : j["vocab"]) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number() || !std::isfinite(e[1].get<double>()))
        refuse(at, "vocabulary entry " + std::to_string(u->tokens.size()) + " is not [piece, score]");
      if (std::int64_t(u->tokens.size()) >= kMaxId) refuse(at, "the vocabulary is longer than 2^24 pieces");
      const std::string piece = e[0].get<std::string>();
      if (!u->vocab.emplace(piece, std::int32_t(u->tokens.size())).second) refuse(at, "the piece '" + piece.substr(0, 40) + "' appears twice");
      u->tokens.push_back(piece), u->score.push_back(e[1].get<double>());
      lowest = std::min(lowest, e[1].get<double>());
      u->longest = std::max(u->longest, code_points(piece).size());
    }
    u->unk_score = lowest - 10;  // as SentencePiece and tokenizers: below every piece
    if (j.contains("unk_id") && !j["unk_id"].is_null()) {
      if (!j["unk_id"].is_number_integer() || j["unk_id"].get<std::int64_t>() < 0 || j["unk_id"].get<std::int64_t>() >= std::int64_t(u->tokens.size()))
        refuse(at, "unk_id is not an id of the vocabulary");
      u->unk = std::int32_t(j["unk_id"].get<std::int64_t>());
    }
    u->byte_fallback = flag_field(j, "byte_fallback", at, false);
    m = std::move(u);
  } else if (type == "WordLevel") {
    auto w = std::make_unique<WordLevel>();
    read_vocab(*w, field(j, "vocab"), at);
    w->unk = unk_of(*w, j, at, false);
    m = std::move(w);
  } else {
    refuse(where, "model '" + type + "' is not supported (BPE, WordPiece, Unigram, WordLevel)");
  }
  m->type = type;
  return m;
}

// --- decoders -----------------------------------------------------------------------------------

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

const std::map<std::string, unsigned char>& char_bytes() {  // byte_chars() inverted
  static const std::map<std::string, unsigned char> table = [] {
    std::map<std::string, unsigned char> t;
    for (int b = 0; b < 256; ++b) t[byte_chars()[std::size_t(b)]] = static_cast<unsigned char>(b);
    return t;
  }();
  return table;
}

struct ByteLevelDecoder : Decoder {
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      std::string mine;
      bool all = true;
      for (char32_t c : code_points(t)) {
        const auto it = char_bytes().find(utf8(c));
        if (it == char_bytes().end()) {
          all = false;
          break;
        }
        mine += char(it->second);
      }
      bytes += all ? mine : t;
    }
    return {lossy_utf8(bytes)};
  }
};
struct WordPieceDecoder : Decoder {
  std::string prefix = "##";
  bool cleanup = true;
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) t = t.rfind(prefix, 0) == 0 ? t.substr(prefix.size()) : " " + t;
      if (cleanup)
        for (const auto& [a, b] : std::initializer_list<std::pair<const char*, const char*>>{
                 {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"},
                 {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}})
          t = replace_all(t, a, b);
    }
    return tokens;
  }
};
struct MetaspaceDecoder : Decoder {
  std::string replacement = "\xE2\x96\x81";
  bool strip_first = true;
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i)  // the first token's replacements are dropped (the prefix tokenizers added)
      tokens[i] = replace_all(tokens[i], replacement, i == 0 && strip_first ? "" : " ");
    return tokens;
  }
};
struct ReplaceDecoder : Decoder {
  std::string from, to;
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (std::string& t : tokens) t = replace_all(t, from, to);
    return tokens;
  }
};
struct ByteFallbackDecoder : Decoder {
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      const std::string text = lossy_utf8(pending);
      if (text == pending) out.push_back(text);
      else for (std::size_t i = 0; i < pending.size(); ++i) out.push_back("\xEF\xBF\xBD");  // invalid: one U+FFFD per byte
      pending.clear();
    };
    for (const std::string& t : tokens) {
      if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
          std::isxdigit(static_cast<unsigned char>(t[4]))) {
        pending += char(std::stoi(t.substr(3, 2), nullptr, 16));
        continue;
      }
      flush();
      out.push_back(t);
    }
    flush();
    return out;
  }
};
struct FuseDecoder : Decoder {
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    return {all};
  }
};
struct StripDecoder : Decoder {
  std::string content;
  std::size_t start = 0, stop = 0;
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (std::string& t : tokens) {
      for (std::size_t k = 0; k < start && t.rfind(content, 0) == 0; ++k) t.erase(0, content.size());
      for (std::size_t k = 0; k < stop && t.size() >= content.size() && t.compare(t.size() - content.size(), content.size(), content) == 0; ++k)
        t.erase(t.size() - content.size());
    }
    return tokens;
  }
};
struct BpeDecoder : Decoder {
  std::string suffix = "</w>";
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = replace_all(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
    return tokens;
  }
};
struct DecoderSequence : Decoder {
  std::vector<std::unique_ptr<Decoder>> parts;
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (const auto& p : parts) tokens = p->decode(std::move(tokens));
    return tokens;
  }
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  if (!j.is_object()) refuse(where, "the decoder is not an object");
  const std::string type = text_field(j, "type", where);
  const std::string at = where + ": decoder " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "WordPiece") {
    auto w = std::make_unique<WordPieceDecoder>();
    w->prefix = text_field(j, "prefix", at, "##"), w->cleanup = flag_field(j, "cleanup", at, true);
    return w;
  }
  if (type == "Metaspace") {
    auto m = std::make_unique<MetaspaceDecoder>();
    m->replacement = text_field(j, "replacement", at, m->replacement);
    m->strip_first = text_field(j, "prepend_scheme", at, flag_field(j, "add_prefix_space", at, true) ? "always" : "never") != "never";
    return m;
  }
  if (type == "Replace") {
    const json& p = field(j, "pattern");
    if (!p.is_object() || !p.contains("String") || !p["String"].is_string()) refuse(at, "only a {\"String\": ...} pattern is supported");
    auto r = std::make_unique<ReplaceDecoder>();
    r->from = p["String"].get<std::string>(), r->to = text_field(j, "content", at);
    return r;
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    auto s = std::make_unique<StripDecoder>();
    s->content = text_field(j, "content", at, " ");
    if (code_points(s->content).size() != 1) refuse(at, "'content' must be one character");
    const auto count = [&](const char* k) -> std::size_t {
      if (!j.contains(k) || !j[k].is_number_unsigned()) refuse(at, std::string("'") + k + "' is not a count");
      return j[k].get<std::size_t>();
    };
    s->start = count("start"), s->stop = count("stop");
    return s;
  }
  if (type == "BPEDecoder") {
    auto b = std::make_unique<BpeDecoder>();
    b->suffix = text_field(j, "suffix", at, "</w>");
    return b;
  }
  if (type == "Sequence") {
    auto s = std::make_unique<DecoderSequence>();
    if (!j.contains("decoders") || !j["decoders"].is_array()) refuse(at, "'decoders' is not a list");
    for (const json& d : j["decoders"])
      if (auto p = make_decoder(d, where)) s->parts.push_back(std::move(p));
    return s;
  }
  refuse(where, "decoder '" + type + "' is not supported");
}

}  // namespace ctgrad::data::hf
