// Turning aligned EN-DE text units (a paragraph, a help page's element, a message) into sentence
// pairs: splitting into sentences only where both sides agree, placeholders checked, untranslated
// and implausible pairs dropped. Pure functions of their text: the fixture tests pin them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ctgrad::data::ende {

// Sentences of a paragraph: a cut after . ! ? (and closing quotes or brackets) where a space and
// an upper-case letter, a digit or an opening quote follow, but not after a known abbreviation
// ("e.g.", "z. B.", "Nr.", ...), a single letter or a number ("1. Januar"). Whitespace collapsed.
std::vector<std::string> split_sentences(std::string_view paragraph);

// The placeholders of a string, sorted: printf conversions (%s, %d, %1$s, %ld, %%  left out),
// Qt/KDE %1..%9, {name} and {0} fields, ${var} and $var, <tags> and &entities;.
std::vector<std::string> placeholders(std::string_view s);
// The same, where they are, left to right: s[begin, end) (a whole tag, attributes too), keyed as
// placeholders() gives it.
struct PlaceholderSpan {
  std::size_t begin, end;
  std::string key;
};
std::vector<PlaceholderSpan> placeholder_spans(std::string_view s);

enum class Placeholders { keep, drop };  // keep a pair whose two sides hold the same set; or drop every pair holding any

// Why an aligned pair is not kept (none: it is).
enum class Reject { none, empty, untranslated, ratio, placeholders, too_long };
// `en` and `de` whitespace-collapsed; then empty, equal sides (untranslated), a length ratio
// outside [1/2.5, 2.5] for sides of 20+ characters (or a difference of more than 40 characters
// under that), different placeholders (or any, with Placeholders::drop), a side over 1000 bytes.
Reject check_pair(const std::string& en, const std::string& de, Placeholders mode);

// A paragraph pair as sentence pairs: the sentences pair up when both sides split into the same
// number and every pair's length ratio is plausible; else the paragraph stays one pair.
std::vector<std::pair<std::string, std::string>> align_paragraph(std::string_view en, std::string_view de);

// Whitespace runs (tabs and newlines too) as one space, trimmed.
std::string collapse_space(std::string_view s);

}  // namespace ctgrad::data::ende
