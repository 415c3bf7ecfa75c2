// EN-DE sentence pairs from gettext catalogues: the Battle for Wesnoth's campaign dialogue and
// narration (Debian wesnoth-1.16-* packages, GPL-2+), whose German .mo files scripts/setup_wesnoth.sh
// extracts without installing the game.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <ctgrad/data/pairs.hpp>

namespace ctgrad::data {

// The messages of a compiled gettext catalogue (.mo, GNU gettext manual "The Format of GNU MO
// Files"): msgid -> msgstr (a plural's forms NUL-separated, a context before \x04), the header
// entry left out, every text UTF-8: a msgstr is converted (iconv) from the charset the header's
// Content-Type declares (gettext's rule: it applies to the translations; msgids are ASCII or UTF-8).
// A message that cannot be converted (a byte its charset lacks, a msgid not UTF-8, a charset iconv
// does not know or none declared, for text that is not ASCII) is dropped and counted. A file that
// is not a whole .mo catalogue is a data_error naming it and what is wrong.
struct Message {
  std::string id, str;
};
struct Catalogue {
  std::vector<Message> messages;
  std::string charset;            // as the header declares it ("" when it declares none)
  std::size_t unconvertible = 0;  // messages dropped, not valid text in their charset
};
Catalogue read_mo(const std::filesystem::path& file);

// Where scripts/setup_wesnoth.sh puts the catalogues: $CTGRAD_DATA/wesnoth/de, CTGRAD_DATA
// defaulting to /var/cache/ctgrad.
std::filesystem::path wesnoth_dir();

// The translated messages of every catalogue in `dir` as sentence pairs: the context and plural
// forms dropped, <i>/<b>/<big>/<small>/<span> tags removed, whitespace collapsed; messages with
// $variables, {macros} or ~ markup, untranslated or unchanged ones, and duplicates are left out.
// A missing folder is a data_error that names the set-up script.
std::vector<SentencePair> wesnoth_pairs(const std::filesystem::path& dir = wesnoth_dir());

}  // namespace ctgrad::data
