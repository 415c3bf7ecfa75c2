// The aligned sources of the EN-DE corpus, each read from files in Debian's own formats and paired
// by that format's keys, never by guessing. A reader takes the files (downloaded and unpacked by
// data/ende/fetch.hpp) and returns documents of aligned units; data/ende/corpus.hpp makes pairs.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ctgrad::data::ende {

struct Unit {
  std::string en, de;  // an aligned paragraph, help element or message, as written
};
struct Document {
  std::string source, id;  // "ddtp" + the package; "libreoffice" + the page's path
  std::vector<Unit> units;
  std::size_t unconvertible = 0;  // units the reader dropped: not text in their declared charset
};

// DDTP: the apt index's Translation-en and Translation-de files (records of Package,
// Description-md5 and Description-<lang>). A German record pairs with the English record of the
// same Description-md5: the short descriptions, then the long descriptions paragraph by paragraph
// (paragraphs are cut at " ." lines) when both have as many; a paragraph with verbatim lines (two
// leading spaces: lists, code) is left out. One document per package.
std::vector<Document> ddtp_documents(const std::filesystem::path& translation_en, const std::filesystem::path& translation_de);

// LibreOffice's help, the compiled pages of libreoffice-help-en-us and -de
// (usr/share/libreoffice/help/<lang>/text/**.html): an element with the same par_id / hd_id on the
// same page pairs with it (ids repeated within a page are left out). Text is the element's with
// tags removed, the macOS variant of a key name dropped, entities decoded. One document per page.
std::vector<Document> libreoffice_documents(const std::filesystem::path& en_help, const std::filesystem::path& de_help);

// gettext catalogues: every .mo file in `catalogues` (the German catalogues of one package, as
// fetch_catalogues leaves them): msgid -> msgstr (a .mo holds translated, non-fuzzy messages only),
// the context and plural forms dropped, keyboard accelerators (_File, &File) removed, messages of
// several lines (a --help text's layout) left out; translations converted to UTF-8 from the
// catalogue's declared charset (read_mo), those that cannot be counted in Document::unconvertible.
// One document per package and catalogue.
std::vector<Document> gettext_documents(const std::filesystem::path& catalogues, const std::string& package);

// A message's text without its accelerator marks: "_Save As" and "&Save As" -> "Save As" ("&&" -> "&",
// entities such as "&amp;" left as they are).
std::string strip_accelerators(std::string_view s);

// The visible text of an HTML fragment: tags removed (<br> as a space), the contents of an element
// of class "MAC" dropped, &amp; &lt; &gt; &quot; &apos; &nbsp; and numeric entities decoded.
std::string html_text(std::string_view html);

}  // namespace ctgrad::data::ende
