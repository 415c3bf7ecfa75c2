#include <ctgrad/data/ende/align.hpp>

#include <algorithm>
#include <array>
#include <cctype>

namespace ctgrad::data::ende {
namespace {

bool ascii_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

// A sentence may start here: an upper-case letter (ASCII or Ä Ö Ü: UTF-8 C3 84/96/9C), a digit,
// an opening quote or bracket.
bool starts_sentence(std::string_view s, std::size_t i) {
  if (i >= s.size()) return false;
  const auto c = static_cast<unsigned char>(s[i]);
  if (ascii_upper(c) || digit(char(c)) || c == '"' || c == '\'' || c == '(') return true;
  if (c == 0xC3 && i + 1 < s.size()) {
    const auto d = static_cast<unsigned char>(s[i + 1]);
    return d == 0x84 || d == 0x96 || d == 0x9C;
  }
  // „ (E2 80 9E), “ (E2 80 9C), « (C2 AB)
  if (c == 0xE2 && i + 2 < s.size()) return s[i + 1] == char(0x80) && (s[i + 2] == char(0x9E) || s[i + 2] == char(0x9C));
  return c == 0xC2 && i + 1 < s.size() && s[i + 1] == char(0xAB);
}

// Closing quotes and brackets that stay with the sentence before a cut.
std::size_t skip_closers(std::string_view s, std::size_t i) {
  for (;;) {
    if (i < s.size() && (s[i] == '"' || s[i] == '\'' || s[i] == ')' || s[i] == ']')) ++i;
    else if (i + 2 < s.size() + 0 && s[i] == char(0xE2) && s[i + 1] == char(0x80) && (s[i + 2] == char(0x9C) || s[i + 2] == char(0x9D) || s[i + 2] == char(0x99))) i += 3;
    else if (i + 1 < s.size() && s[i] == char(0xC2) && s[i + 1] == char(0xBB)) i += 2;
    else return i;
  }
}

// Words (lower case, without their final dot) after which a dot does not end a sentence.
constexpr std::array<std::string_view, 44> kAbbreviations{
    "e.g", "i.e", "etc", "vs", "cf", "approx", "dr", "mr", "mrs", "ms", "no", "nos", "fig", "vol", "ch", "sec", "resp",
    "nr", "bzw", "usw", "ca", "evtl", "ggf", "inkl", "vgl", "z.b", "d.h", "u.a", "bspw", "sog", "abb", "max", "min",
    "str", "tel", "st", "jh", "zb", "dh", "ua", "bzgl", "einschl", "allg", "gem"};

bool abbreviation_before(std::string_view s, std::size_t dot) {
  std::size_t b = dot;
  while (b > 0 && s[b - 1] != ' ' && s[b - 1] != '(') --b;
  std::string w(s.substr(b, dot - b));
  if (w.empty()) return true;  // " . " is not a sentence's end
  for (char& c : w) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (w.size() == 1) return true;  // an initial, "z. B."
  if (std::all_of(w.begin(), w.end(), [](char c) { return digit(c); })) return true;  // "1. Januar", "Version 2."
  return std::find(kAbbreviations.begin(), kAbbreviations.end(), w) != kAbbreviations.end();
}

std::size_t code_points(std::string_view s) {
  return std::size_t(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool plausible_lengths(std::string_view en, std::string_view de) {
  const double e = double(code_points(en)), d = double(code_points(de));
  if (e >= 20 && d >= 20) return d / e <= 2.5 && e / d <= 2.5;
  return std::abs(d - e) <= 40;
}

bool ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::string collapse_space(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool space = false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::vector<std::string> split_sentences(std::string_view paragraph) {
  const std::string s = collapse_space(paragraph);
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c != '.' && c != '!' && c != '?') continue;
    const std::size_t j = skip_closers(s, i + 1);
    if (j >= s.size() || s[j] != ' ' || !starts_sentence(s, j + 1)) continue;
    if (c == '.' && (abbreviation_before(s, i) || (i + 1 < s.size() && s[i + 1] == '.'))) continue;
    out.push_back(s.substr(start, j - start));
    start = j + 1;
    i = j;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::vector<PlaceholderSpan> placeholder_spans(std::string_view s) {
  std::vector<PlaceholderSpan> out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') {
      if (i + 1 < s.size() && s[i + 1] == '%') {
        ++i;
        continue;
      }
      std::size_t j = i + 1;
      while (j < s.size() && digit(s[j])) ++j;
      const std::size_t digits_end = j;
      if (j > i + 1 && j < s.size() && s[j] == '$') ++j;  // positional: %1$s
      else j = i + 1;
      while (j < s.size() && std::string_view("-+#0'").find(s[j]) != std::string_view::npos) ++j;
      while (j < s.size() && (digit(s[j]) || s[j] == '*')) ++j;
      if (j < s.size() && s[j] == '.') {
        ++j;
        while (j < s.size() && (digit(s[j]) || s[j] == '*')) ++j;
      }
      while (j < s.size() && std::string_view("hlLqjzt").find(s[j]) != std::string_view::npos) ++j;
      if (j < s.size() && std::string_view("diouxXeEfFgGaAcsp").find(s[j]) != std::string_view::npos) {
        out.push_back({i, j + 1, std::string(s.substr(i, j + 1 - i))});
        i = j;
      } else if (digits_end > i + 1) {  // Qt and KDE: %1
        out.push_back({i, digits_end, std::string(s.substr(i, digits_end - i))});
        i = digits_end - 1;
      }
    } else if (c == '{') {
      std::size_t j = i + 1;
      while (j < s.size() && j - i < 48 && (ident(s[j]) || s[j] == '.' || s[j] == ':' || s[j] == '-' || s[j] == '$')) ++j;
      if (j < s.size() && s[j] == '}' && j > i + 1) {
        out.push_back({i, j + 1, std::string(s.substr(i, j + 1 - i))});
        i = j;
      }
    } else if (c == '$') {
      std::size_t j = i + 1;
      if (j < s.size() && s[j] == '{') {
        const std::size_t e = s.find('}', j);
        if (e != std::string_view::npos && e - i < 64) {
          out.push_back({i, e + 1, std::string(s.substr(i, e + 1 - i))});
          i = e;
        }
      } else if (j < s.size() && (std::isalpha(static_cast<unsigned char>(s[j])) || s[j] == '_')) {
        while (j < s.size() && ident(s[j])) ++j;
        out.push_back({i, j, std::string(s.substr(i, j - i))});
        i = j - 1;
      }
    } else if (c == '<' && i + 1 < s.size() && (s[i + 1] == '/' || std::isalpha(static_cast<unsigned char>(s[i + 1])))) {
      const std::size_t e = s.find('>', i);
      if (e != std::string_view::npos && e - i < 256) {
        std::size_t j = i + 1 + (s[i + 1] == '/');
        while (j < e && (ident(s[j]) || s[j] == ':' || s[j] == '-')) ++j;
        out.push_back({i, e + 1, std::string(s.substr(i, j - i)) + ">"});  // keyed by the tag, not its (translatable) attributes
        i = e;
      }
    } else if (c == '&') {
      std::size_t j = i + 1 + (i + 1 < s.size() && s[i + 1] == '#');
      const std::size_t from = j;
      while (j < s.size() && j - i < 12 && std::isalnum(static_cast<unsigned char>(s[j]))) ++j;
      if (j > from && j < s.size() && s[j] == ';') {
        out.push_back({i, j + 1, std::string(s.substr(i, j + 1 - i))});
        i = j;
      }
    }
  }
  return out;
}

std::vector<std::string> placeholders(std::string_view s) {
  std::vector<std::string> out;
  for (PlaceholderSpan& p : placeholder_spans(s)) out.push_back(std::move(p.key));
  std::sort(out.begin(), out.end());
  return out;
}

Reject check_pair(const std::string& en, const std::string& de, Placeholders mode) {
  if (en.empty() || de.empty()) return Reject::empty;
  if (en == de) return Reject::untranslated;
  if (en.size() > 1000 || de.size() > 1000) return Reject::too_long;
  if (!plausible_lengths(en, de)) return Reject::ratio;
  const auto pe = placeholders(en), pd = placeholders(de);
  if (mode == Placeholders::drop ? !pe.empty() || !pd.empty() : pe != pd) return Reject::placeholders;
  return Reject::none;
}

std::vector<std::pair<std::string, std::string>> align_paragraph(std::string_view en, std::string_view de) {
  auto se = split_sentences(en), sd = split_sentences(de);
  std::vector<std::pair<std::string, std::string>> out;
  bool split = se.size() == sd.size() && se.size() > 1;
  for (std::size_t i = 0; split && i < se.size(); ++i) split = plausible_lengths(se[i], sd[i]);
  if (!split) {
    out.emplace_back(collapse_space(en), collapse_space(de));
    return out;
  }
  for (std::size_t i = 0; i < se.size(); ++i) out.emplace_back(std::move(se[i]), std::move(sd[i]));
  return out;
}

}  // namespace ctgrad::data::ende
