// Normalizers and pre-tokenizers of a Hugging Face tokenizer.json, as the `tokenizers` library
// defines them. Unicode from ICU: normalization forms, full case mapping, character properties,
// and the regular expressions (whose \s and \S are rewritten to White_Space, Oniguruma's meaning
// in the Rust library; ICU's own \s lacks U+000B and U+0085).
#include "hf_tokenizer_parts.hpp"

#include <algorithm>

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>

namespace ctgrad::data::hf {

void refuse(const std::string& where, const std::string& what) { throw data_error("ctgrad: tokenizer " + where + ": " + what); }

std::string text_field(const json& j, const char* key, const std::string& where, const std::string& fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) refuse(where, std::string("'") + key + "' is not a string");
  return j[key].get<std::string>();
}
bool flag_field(const json& j, const char* key, const std::string& where, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) refuse(where, std::string("'") + key + "' is not true or false");
  return j[key].get<bool>();
}
const json& field(const json& j, const char* key) {
  static const json none;
  const auto it = j.find(key);
  return it == j.end() ? none : *it;
}

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  for (int32_t i = 0; i < u.length(); i = u.moveIndex32(i, 1)) out.push_back(char32_t(u.char32At(i)));
  return out;
}

std::string utf8(char32_t c) {
  std::string s;
  icu::UnicodeString(UChar32(c)).toUTF8String(s);
  return s;
}

std::string lossy_utf8(const std::string& b) {
  std::string out;
  std::size_t i = 0;
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(b[k]); };
  while (i < b.size()) {
    const unsigned char c = byte(i);
    std::size_t need = c < 0x80 ? 0 : (c >= 0xC2 && c <= 0xDF) ? 1 : (c >= 0xE0 && c <= 0xEF) ? 2 : (c >= 0xF0 && c <= 0xF4) ? 3 : 99;
    if (need == 0) {
      out += char(c), ++i;
      continue;
    }
    if (need == 99) {
      out += "\xEF\xBF\xBD", ++i;
      continue;
    }
    // The second byte's range depends on the first (no overlong forms, no surrogates, <= U+10FFFF).
    unsigned char lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    std::size_t k = 1;
    for (; k <= need && i + k < b.size(); ++k) {
      const unsigned char d = byte(i + k);
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) break;
    }
    if (k == need + 1) out.append(b, i, need + 1), i += need + 1;
    else out += "\xEF\xBF\xBD", i += k;  // the maximal invalid subsequence
  }
  return out;
}

namespace {

icu::UnicodeString u16(const std::string& s) { return icu::UnicodeString::fromUTF8(s); }
std::string u8(const icu::UnicodeString& u) {
  std::string s;
  u.toUTF8String(s);
  return s;
}

const json& list_field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_array()) refuse(where, std::string("'") + key + "' is not a list");
  return j[key];
}

// A pattern {"String": s} (literal) or {"Regex": r}, compiled for ICU.
std::unique_ptr<icu::RegexPattern> compile(const json& p, const std::string& where) {
  if (!p.is_object() || p.size() != 1 || !(p.contains("String") || p.contains("Regex")) || !p.begin()->is_string())
    refuse(where, "a pattern must be {\"String\": ...} or {\"Regex\": ...}");
  const std::string text = p.begin()->get<std::string>();
  std::string rewritten;
  uint32_t flags = 0;
  if (p.contains("String")) flags = UREGEX_LITERAL, rewritten = text;
  else
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) {
        if (text[i + 1] == 's') rewritten += "\\p{White_Space}";
        else if (text[i + 1] == 'S') rewritten += "\\P{White_Space}";
        else rewritten += text.substr(i, 2);
        ++i;
      } else {
        rewritten += text[i];
      }
    }
  UErrorCode status = U_ZERO_ERROR;
  UParseError pe;
  std::unique_ptr<icu::RegexPattern> r(icu::RegexPattern::compile(u16(rewritten), flags, pe, status));
  if (U_FAILURE(status)) refuse(where, "the regular expression '" + text.substr(0, 80) + "' does not compile: " + u_errorName(status));
  return r;
}

// [begin, end) of each non-empty match, in UTF-16 units of u. A pattern that backtracks without
// end (a hostile file's) runs into ICU's time limit and is an error, never a hang or a partial split.
std::vector<std::pair<int32_t, int32_t>> matches(const icu::RegexPattern& re, const icu::UnicodeString& u) {
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(re.matcher(u, status));
  if (U_SUCCESS(status)) m->setTimeLimit(1000, status);  // ICU's steps, about a second per match: far beyond a sane pattern's needs
  std::vector<std::pair<int32_t, int32_t>> out;
  while (U_SUCCESS(status) && m->find(status)) {
    const int32_t b = m->start(status), e = m->end(status);
    if (e > b) out.emplace_back(b, e);
  }
  if (U_FAILURE(status))
    throw data_error(std::string("ctgrad: tokenizer: a regular expression of the tokenizer failed on the text (") + u_errorName(status) + ")");
  return out;
}

// --- normalizers --------------------------------------------------------------------------------

struct Form : Normalizer {
  const icu::Normalizer2* n;
  explicit Form(const icu::Normalizer2* f) : n(f) {}
  std::string apply(const std::string& s) const override {
    UErrorCode status = U_ZERO_ERROR;
    return u8(n->normalize(u16(s), status));
  }
};
struct Lowercase : Normalizer {  // each character's full lower case (Rust's char::to_lowercase: no Final_Sigma context)
  std::string apply(const std::string& s) const override {
    std::string out;
    for (char32_t c : code_points(s)) out += u8(icu::UnicodeString(UChar32(c)).toLower(icu::Locale::getRoot()));
    return out;
  }
};
struct Strip : Normalizer {
  bool left, right;
  Strip(bool l, bool r) : left(l), right(r) {}
  std::string apply(const std::string& s) const override {
    auto cps = code_points(s);
    std::size_t b = 0, e = cps.size();
    while (left && b < e && u_hasBinaryProperty(UChar32(cps[b]), UCHAR_WHITE_SPACE)) ++b;
    while (right && e > b && u_hasBinaryProperty(UChar32(cps[e - 1]), UCHAR_WHITE_SPACE)) --e;
    std::string out;
    for (std::size_t i = b; i < e; ++i) out += utf8(cps[i]);
    return out;
  }
};
struct StripAccents : Normalizer {  // drops combining marks (as Hugging Face's, after an NFD it leaves to the user)
  std::string apply(const std::string& s) const override {
    std::string out;
    for (char32_t c : code_points(s))
      if (u_charType(UChar32(c)) != U_NON_SPACING_MARK) out += utf8(c);
    return out;
  }
};
struct Replace : Normalizer {
  std::unique_ptr<icu::RegexPattern> re;
  std::string content;
  std::string apply(const std::string& s) const override {
    const icu::UnicodeString u = u16(s);
    std::string out;
    int32_t at = 0;
    for (const auto& [b, e] : matches(*re, u)) out += u8(u.tempSubStringBetween(at, b)) + content, at = e;
    return out + u8(u.tempSubStringBetween(at));
  }
};
struct Prepend : Normalizer {
  std::string prefix;
  std::string apply(const std::string& s) const override { return s.empty() ? s : prefix + s; }
};
struct Sequence : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> parts;
  std::string apply(const std::string& s) const override {
    std::string t = s;
    for (const auto& p : parts) t = p->apply(t);
    return t;
  }
};

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}
bool bert_whitespace(char32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_hasBinaryProperty(UChar32(c), UCHAR_WHITE_SPACE); }
bool bert_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const int8_t t = u_charType(UChar32(c));
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_UNASSIGNED || t == U_PRIVATE_USE_CHAR || t == U_SURROGATE;
}
bool bert_punctuation(char32_t c) { return (c < 128 && std::ispunct(int(c))) || u_ispunct(UChar32(c)); }

struct BertNormalizer : Normalizer {
  bool clean_text, chinese, strip_accents, lowercase;
  std::string apply(const std::string& s) const override {
    std::string out;
    for (char32_t c : code_points(s)) {
      if (clean_text) {
        if (c == 0 || c == 0xFFFD || bert_control(c)) continue;
        if (bert_whitespace(c)) c = ' ';
      }
      const bool apart = chinese && is_cjk(c);  // a CJK character as its own word
      if (apart) out += ' ';
      out += utf8(c);
      if (apart) out += ' ';
    }
    if (strip_accents) {
      UErrorCode status = U_ZERO_ERROR;
      out = StripAccents().apply(u8(icu::Normalizer2::getNFDInstance(status)->normalize(u16(out), status)));
    }
    if (lowercase) out = Lowercase().apply(out);
    return out;
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  if (!j.is_object()) refuse(where, "the normalizer is not an object");
  const std::string type = text_field(j, "type", where);
  const std::string at = where + ": normalizer " + type;
  UErrorCode status = U_ZERO_ERROR;
  if (type == "NFC") return std::make_unique<Form>(icu::Normalizer2::getNFCInstance(status));
  if (type == "NFD") return std::make_unique<Form>(icu::Normalizer2::getNFDInstance(status));
  if (type == "NFKC") return std::make_unique<Form>(icu::Normalizer2::getNFKCInstance(status));
  if (type == "NFKD") return std::make_unique<Form>(icu::Normalizer2::getNFKDInstance(status));
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip") return std::make_unique<Strip>(flag_field(j, "strip_left", at, true), flag_field(j, "strip_right", at, true));
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Replace") {
    auto r = std::make_unique<Replace>();
    r->re = compile(field(j, "pattern"), at);
    r->content = text_field(j, "content", at);
    return r;
  }
  if (type == "Prepend") {
    auto p = std::make_unique<Prepend>();
    p->prefix = text_field(j, "prepend", at);
    return p;
  }
  if (type == "BertNormalizer") {
    auto b = std::make_unique<BertNormalizer>();
    b->clean_text = flag_field(j, "clean_text", at, true), b->chinese = flag_field(j, "handle_chinese_chars", at, true);
    b->lowercase = flag_field(j, "lowercase", at, true), b->strip_accents = flag_field(j, "strip_accents", at, b->lowercase);
    return b;
  }
  if (type == "Sequence") {
    auto s = std::make_unique<Sequence>();
    for (const json& n : list_field(j, "normalizers", at))
      if (auto p = make_normalizer(n, where)) s->parts.push_back(std::move(p));
    return s;
  }
  if (type == "Precompiled") return make_precompiled(j, at);
  refuse(where, "normalizer '" + type + "' is not supported");
}

// --- pre-tokenizers -----------------------------------------------------------------------------

// GPT-2's byte-to-character table: printable bytes as themselves, the rest from U+0100 up.
const std::vector<std::string>& byte_chars() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[std::size_t(b)] = utf8(printable ? char32_t(b) : char32_t(256 + n++));
    }
    return t;
  }();
  return table;
}


namespace {

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

Behavior behavior_of(const json& j, const std::string& where, Behavior fallback) {
  const std::string b = text_field(j, "behavior", where);
  if (b.empty()) return fallback;
  if (b == "Removed") return Behavior::removed;
  if (b == "Isolated") return Behavior::isolated;
  if (b == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (b == "MergedWithNext") return Behavior::merged_with_next;
  if (b == "Contiguous") return Behavior::contiguous;
  refuse(where, "behavior '" + b + "' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

// Splits s into pieces given which spans are delimiters (matches), as `tokenizers`' SplitDelimiterBehavior:
// a match merged with its previous (or next) piece only when that piece is not itself a match.
std::vector<std::string> split_by(const std::vector<std::pair<std::string, bool>>& spans, Behavior how) {
  std::vector<std::string> out;
  bool previous_match = false;
  switch (how) {
    case Behavior::removed:
      for (const auto& [text, m] : spans)
        if (!m) out.push_back(text);
      break;
    case Behavior::isolated:
      for (const auto& [text, m] : spans) out.push_back(text);
      break;
    case Behavior::contiguous:
      for (const auto& [text, m] : spans) {
        if (m && previous_match) out.back() += text;
        else out.push_back(text);
        previous_match = m;
      }
      break;
    case Behavior::merged_with_previous:
      for (const auto& [text, m] : spans) {
        if (m && !previous_match && !out.empty()) out.back() += text;
        else out.push_back(text);
        previous_match = m;
      }
      break;
    case Behavior::merged_with_next:  // the same fold from the end
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->second && !previous_match && !out.empty()) out.back() = it->first + out.back();
        else out.push_back(it->first);
        previous_match = it->second;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
  return out;
}

std::vector<std::pair<std::string, bool>> regex_spans(const icu::RegexPattern& re, const std::string& s, bool invert) {
  const icu::UnicodeString u = u16(s);
  std::vector<std::pair<std::string, bool>> spans;
  int32_t at = 0;
  for (const auto& [b, e] : matches(re, u)) {
    if (b > at) spans.emplace_back(u8(u.tempSubStringBetween(at, b)), invert);
    spans.emplace_back(u8(u.tempSubStringBetween(b, e)), !invert);
    at = e;
  }
  if (at < u.length()) spans.emplace_back(u8(u.tempSubStringBetween(at)), invert);
  return spans;
}

// Each delimiter character a span of its own (one match per character, as `tokenizers` splits on a
// character predicate), the runs between them one span each.
template <class IsDelimiter>
std::vector<std::pair<std::string, bool>> char_spans(const std::string& s, IsDelimiter is_delim) {
  std::vector<std::pair<std::string, bool>> spans;
  for (char32_t c : code_points(s)) {
    const bool d = is_delim(c);
    if (!d && !spans.empty() && !spans.back().second) spans.back().first += utf8(c);
    else spans.emplace_back(utf8(c), d);
  }
  return spans;
}

struct ByteLevel : PreTokenizer {
  bool add_prefix_space = true, use_regex = true;
  std::unique_ptr<icu::RegexPattern> re;
  std::vector<std::string> split(const std::string& s, bool) const override {
    std::string t = s;
    if (add_prefix_space && !t.empty() && t[0] != ' ') t = " " + t;
    std::vector<std::string> pieces;
    if (use_regex)
      for (const auto& [text, m] : regex_spans(*re, t, false)) pieces.push_back(text);
    else pieces.push_back(t);
    for (std::string& p : pieces) {
      std::string mapped;
      for (unsigned char b : p) mapped += byte_chars()[b];
      p = mapped;
    }
    return pieces;
  }
};
struct Split : PreTokenizer {
  std::unique_ptr<icu::RegexPattern> re;
  Behavior how = Behavior::isolated;
  bool invert = false;
  std::vector<std::string> split(const std::string& s, bool) const override { return split_by(regex_spans(*re, s, invert), how); }
};
struct Metaspace : PreTokenizer {
  std::string replacement = "\xE2\x96\x81";  // U+2581
  std::string scheme = "always";             // always, first, never
  bool do_split = true;
  std::vector<std::string> split(const std::string& s, bool first) const override {
    std::string t;
    for (char c : s) c == ' ' ? t += replacement : t += c;
    if ((scheme == "always" || (scheme == "first" && first)) && t.rfind(replacement, 0) != 0) t = replacement + t;
    if (!do_split) return {t};
    std::vector<std::pair<std::string, bool>> spans;
    std::size_t at = 0;
    for (std::size_t k; (k = t.find(replacement, at)) != std::string::npos; at = k + replacement.size()) {
      if (k > at) spans.emplace_back(t.substr(at, k - at), false);
      spans.emplace_back(replacement, true);
    }
    if (at < t.size()) spans.emplace_back(t.substr(at), false);
    return split_by(spans, Behavior::merged_with_next);
  }
};
struct BertPre : PreTokenizer {
  std::vector<std::string> split(const std::string& s, bool) const override {
    std::vector<std::string> words = split_by(char_spans(s, bert_whitespace), Behavior::removed), out;
    for (const std::string& w : words)
      for (const std::string& p : split_by(char_spans(w, bert_punctuation), Behavior::isolated)) out.push_back(p);
    return out;
  }
};
struct RegexPieces : PreTokenizer {  // the matches only (Whitespace: \w+|[^\w\s]+)
  std::unique_ptr<icu::RegexPattern> re;
  std::vector<std::string> split(const std::string& s, bool) const override { return split_by(regex_spans(*re, s, true), Behavior::removed); }
};
struct WhitespaceSplit : PreTokenizer {
  std::vector<std::string> split(const std::string& s, bool) const override {
    return split_by(char_spans(s, [](char32_t c) { return u_hasBinaryProperty(UChar32(c), UCHAR_WHITE_SPACE) != 0; }), Behavior::removed);
  }
};
struct Digits : PreTokenizer {
  bool individual = false;
  std::vector<std::string> split(const std::string& s, bool) const override {
    return split_by(char_spans(s, [](char32_t c) {  // Rust's char::is_numeric: Nd, Nl, No
                      const int8_t t = u_charType(UChar32(c));
                      return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
                    }),
                    individual ? Behavior::isolated : Behavior::contiguous);
  }
};
struct Punctuation : PreTokenizer {
  Behavior how = Behavior::isolated;
  std::vector<std::string> split(const std::string& s, bool) const override { return split_by(char_spans(s, bert_punctuation), how); }
};
struct PreSequence : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  std::vector<std::string> split(const std::string& s, bool first) const override {
    std::vector<std::string> pieces{s};
    for (const auto& p : parts) {
      std::vector<std::string> next;
      for (std::size_t i = 0; i < pieces.size(); ++i)
        for (std::string& q : p->split(pieces[i], first && i == 0)) next.push_back(std::move(q));
      pieces = std::move(next);
    }
    return pieces;
  }
};

}  // namespace

const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  if (!j.is_object()) refuse(where, "the pre-tokenizer is not an object");
  const std::string type = text_field(j, "type", where);
  const std::string at = where + ": pre_tokenizer " + type;
  if (type == "ByteLevel") {
    auto b = std::make_unique<ByteLevel>();
    b->add_prefix_space = flag_field(j, "add_prefix_space", at, true), b->use_regex = flag_field(j, "use_regex", at, true);
    b->re = compile(json{{"Regex", kGpt2Pattern}}, at);
    return b;
  }
  if (type == "Split") {
    auto s = std::make_unique<Split>();
    s->re = compile(field(j, "pattern"), at);
    s->how = behavior_of(j, at, Behavior::isolated), s->invert = flag_field(j, "invert", at, false);
    return s;
  }
  if (type == "Metaspace") {
    auto m = std::make_unique<Metaspace>();
    m->replacement = text_field(j, "replacement", at, m->replacement);
    if (code_points(m->replacement).size() != 1) refuse(at, "the replacement must be one character");
    m->scheme = text_field(j, "prepend_scheme", at, flag_field(j, "add_prefix_space", at, true) ? "always" : "never");
    if (m->scheme != "always" && m->scheme != "first" && m->scheme != "never") refuse(at, "prepend_scheme '" + m->scheme + "' is not always, first or never");
    m->do_split = flag_field(j, "split", at, true);
    return m;
  }
  if (type == "BertPreTokenizer") return std::make_unique<BertPre>();
  if (type == "Whitespace") {
    auto w = std::make_unique<RegexPieces>();
    w->re = compile(json{{"Regex", R"(\w+|[^\w\s]+)"}}, at);
    return w;
  }
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
  if (type == "Digits") {
    auto d = std::make_unique<Digits>();
    d->individual = flag_field(j, "individual_digits", at, false);
    return d;
  }
  if (type == "Punctuation") {
    auto p = std::make_unique<Punctuation>();
    p->how = behavior_of(j, at, Behavior::isolated);
    return p;
  }
  if (type == "Sequence") {
    auto s = std::make_unique<PreSequence>();
    for (const json& p : list_field(j, "pretokenizers", at))
      if (auto q = make_pre_tokenizer(p, where)) s->parts.push_back(std::move(q));
    return s;
  }
  refuse(where, "pre-tokenizer '" + type + "' is not supported");
}

}  // namespace ctgrad::data::hf
