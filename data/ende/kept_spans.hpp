// What a translation must keep as it is: a line's placeholders and markup (align.hpp's
// placeholder_spans) and runs of characters the vocabulary lacks. `ctgrad translate` translates
// the text between them and puts them back where they were.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ctgrad::data::ende {

// line = text[0] kept[0] text[1] ... kept[n-1] text[n]  (text.size() == kept.size() + 1).
struct KeptSpans {
  std::vector<std::string> text, kept;
};

// `unknown(c)`: whether the vocabulary lacks the UTF-8 character c (one code point's bytes).
KeptSpans cut_around_kept(std::string_view line, const std::function<bool(std::string_view)>& unknown);

// Each piece of text as its translation `translated(core)` would make it: the core (the piece
// without its leading and trailing spaces) translated when it holds a letter or digit, copied
// otherwise, the spaces kept; the kept spans between them as they were.
std::string join_around(const KeptSpans& k, const std::function<std::string(const std::string&)>& translated);
// The cores join_around translates, in order.
std::vector<std::string> cores_to_translate(const KeptSpans& k);

// The UTF-8 characters of s, each its bytes (an invalid byte as itself).
std::vector<std::string_view> utf8_chars(std::string_view s);

}  // namespace ctgrad::data::ende
