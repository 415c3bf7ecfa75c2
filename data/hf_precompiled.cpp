// The Precompiled normalizer of a tokenizer.json: SentencePiece's compiled normalization rules
// (`precompiled_charsmap`, base64), as T5's, mT5's, XLM-R's and ALBERT's files carry them. The
// blob is a little-endian u32 (the trie's size in bytes), a Darts-clone double-array trie over
// UTF-8 bytes, then the replacements, each ending in a NUL. Applied as Hugging Face's
// spm_precompiled applies it (the reference Hugging Face checked against SentencePiece on XNLI):
// per extended grapheme cluster shorter than 6 bytes, the first (shortest) rule matching a prefix
// replaces the whole cluster; otherwise, and for a cluster no rule matches, character by
// character. Written here: no Debian library reads the format (libsentencepiece keeps its
// normalizer internal), and it is a few dozen lines.
#include <memory>

#include <unicode/brkiter.h>
#include <unicode/unistr.h>

#include "hf_tokenizer_parts.hpp"

#include <ctgrad/data/text.hpp>

namespace ctgrad::data::hf {
namespace {

std::string base64_decode(const std::string& text, const std::string& where) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] != '='; ++i) {
    const int v = value(text[i]);
    if (v < 0) refuse(where, "precompiled_charsmap is not base64 (at character " + std::to_string(i) + ")");
    acc = (acc << 6) | std::uint32_t(v), bits += 6;
    if (bits >= 8) bits -= 8, out.push_back(char((acc >> bits) & 0xFF));
  }
  for (; i < text.size(); ++i)
    if (text[i] != '=') refuse(where, "precompiled_charsmap is not base64 (text after its padding)");
  return out;
}

struct Precompiled : Normalizer {
  std::vector<std::uint32_t> units;  // the double array
  std::string replacements;

  // The replacement of the shortest rule matching a prefix of `key`; null when none does.
  const char* transform(std::string_view key) const {
    auto offset = [](std::uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
    std::size_t node = offset(units[0]);
    for (const unsigned char c : key) {
      if (c == 0) return nullptr;
      node ^= c;
      if (node >= units.size()) return nullptr;
      const std::uint32_t unit = units[node];
      if ((unit & ((1u << 31) | 0xFF)) != c) return nullptr;  // the label
      node ^= offset(unit);
      if (node >= units.size()) return nullptr;
      if ((unit >> 8) & 1) {  // a leaf: the value is where its replacement starts (after a NUL, or at 0)
        const std::size_t at = units[node] & ((1u << 31) - 1);
        if (at >= replacements.size() || (at > 0 && replacements[at - 1] != '\0'))
          throw data_error("ctgrad: tokenizer: precompiled_charsmap has a rule pointing inside a replacement (at byte " + std::to_string(at) + ")");
        return replacements.c_str() + at;
      }
    }
    return nullptr;
  }

  std::string apply(const std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::BreakIterator> clusters(icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), status));
    if (U_FAILURE(status)) throw data_error("ctgrad: tokenizer: ICU has no grapheme break rules");
    const icu::UnicodeString text = icu::UnicodeString::fromUTF8(lossy_utf8(s));
    clusters->setText(text);
    for (std::int32_t b = clusters->first(), e = clusters->next(); e != icu::BreakIterator::DONE; b = e, e = clusters->next()) {
      std::string cluster;
      text.tempSubStringBetween(b, e).toUTF8String(cluster);
      if (cluster.size() < 6)
        if (const char* r = transform(cluster)) {
          out += r;
          continue;
        }
      for (std::size_t at = 0; at < cluster.size();) {
        std::size_t n = 1;  // the character's UTF-8 length (the text is valid UTF-8 here)
        const unsigned char lead = static_cast<unsigned char>(cluster[at]);
        if (lead >= 0xF0) n = 4;
        else if (lead >= 0xE0) n = 3;
        else if (lead >= 0xC0) n = 2;
        const std::string_view ch(cluster.data() + at, std::min(n, cluster.size() - at));
        if (const char* r = transform(ch)) out += r;
        else out += ch;
        at += ch.size();
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_precompiled(const json& j, const std::string& where) {
  const std::string blob = base64_decode(text_field(j, "precompiled_charsmap", where), where);
  if (blob.size() < 4) refuse(where, "precompiled_charsmap is shorter than its header");
  const std::uint32_t trie_bytes = std::uint32_t(static_cast<unsigned char>(blob[0])) | std::uint32_t(static_cast<unsigned char>(blob[1])) << 8 |
                                   std::uint32_t(static_cast<unsigned char>(blob[2])) << 16 | std::uint32_t(static_cast<unsigned char>(blob[3])) << 24;
  if (trie_bytes == 0 || trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4)
    refuse(where, "precompiled_charsmap's trie of " + std::to_string(trie_bytes) + " bytes does not fit its " + std::to_string(blob.size()) + " bytes");
  auto p = std::make_unique<Precompiled>();
  p->units.resize(trie_bytes / 4);
  for (std::size_t i = 0; i < p->units.size(); ++i)
    for (int k = 0; k < 4; ++k) p->units[i] |= std::uint32_t(static_cast<unsigned char>(blob[4 + 4 * i + std::size_t(k)])) << (8 * k);
  p->replacements = blob.substr(4 + trie_bytes);
  if (lossy_utf8(p->replacements) != p->replacements) refuse(where, "precompiled_charsmap's replacements are not UTF-8");
  if (!p->replacements.empty() && p->replacements.back() != '\0') p->replacements.push_back('\0');  // every replacement ends
  return p;
}

}  // namespace ctgrad::data::hf
