#include <ctgrad/data/ende/align.hpp>
#include <ctgrad/data/ende/kept_spans.hpp>

#include <cctype>

namespace ctgrad::data::ende {

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
    for (std::size_t k = 1; k < n; ++k)
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) n = 1;  // not a whole character: the byte alone
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

KeptSpans cut_around_kept(std::string_view line, const std::function<bool(std::string_view)>& unknown) {
  std::vector<bool> keep(line.size(), false);
  for (const PlaceholderSpan& p : placeholder_spans(line))
    for (std::size_t i = p.begin; i < p.end; ++i) keep[i] = true;
  std::size_t at = 0;
  for (std::string_view c : utf8_chars(line)) {
    if (c != " " && c != "\t" && unknown(c))
      for (std::size_t i = at; i < at + c.size(); ++i) keep[i] = true;
    at += c.size();
  }
  KeptSpans k;
  k.text.emplace_back();
  for (std::size_t i = 0; i < line.size();) {
    std::size_t j = i;
    while (j < line.size() && keep[j] == keep[i]) ++j;
    if (keep[i]) {
      k.kept.emplace_back(line.substr(i, j - i));
      k.text.emplace_back();
    } else {
      k.text.back() = std::string(line.substr(i, j - i));
    }
    i = j;
  }
  return k;
}

namespace {
struct Core {
  std::size_t begin, end;  // of the piece's text without its leading and trailing spaces
  bool translate;
};
Core core_of(const std::string& t) {
  const std::size_t b = t.find_first_not_of(" \t"), e = t.find_last_not_of(" \t");
  if (b == std::string::npos) return {0, 0, false};
  // A letter or digit: ASCII ones, or a character past U+00BF that is not general punctuation
  // (U+2000-U+206F: dashes, quotes, the ellipsis) or a Latin-1 sign (« » · and the like).
  bool word = false;
  for (std::string_view c : utf8_chars(std::string_view(t).substr(b, e + 1 - b))) {
    const unsigned char c0 = static_cast<unsigned char>(c[0]);
    if (c.size() == 1) word |= std::isalnum(c0) != 0;
    else if (c.size() == 2) word |= c0 >= 0xC3;                                                      // U+00C0 and up
    else word |= !(c.size() == 3 && c0 == 0xE2 && static_cast<unsigned char>(c[1]) >= 0x80 && static_cast<unsigned char>(c[1]) <= 0x81);
  }
  return {b, e + 1, word};
}
}  // namespace

std::vector<std::string> cores_to_translate(const KeptSpans& k) {
  std::vector<std::string> out;
  for (const std::string& t : k.text)
    if (const Core c = core_of(t); c.translate) out.push_back(t.substr(c.begin, c.end - c.begin));
  return out;
}

std::string join_around(const KeptSpans& k, const std::function<std::string(const std::string&)>& translated) {
  std::string out;
  for (std::size_t i = 0; i < k.text.size(); ++i) {
    const std::string& t = k.text[i];
    const Core c = core_of(t);
    if (c.translate) out += t.substr(0, c.begin) + translated(t.substr(c.begin, c.end - c.begin)) + t.substr(c.end);
    else out += t;
    if (i < k.kept.size()) out += k.kept[i];
  }
  return out;
}

}  // namespace ctgrad::data::ende
