#include <ctgrad/data/ende/align.hpp>
#include <ctgrad/data/ende/sources.hpp>
#include <ctgrad/data/gettext.hpp>

#include <algorithm>
#include <cctype>

namespace ctgrad::data::ende {
namespace {

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) || (static_cast<unsigned char>(c) & 0x80); }

// A message as one text: the context (before \\x04) and the plural forms (after the first NUL) dropped.
std::string_view singular(std::string_view m) {
  if (const std::size_t ctx = m.find('\x04'); ctx != std::string_view::npos) m.remove_prefix(ctx + 1);
  if (const std::size_t nul = m.find('\0'); nul != std::string_view::npos) m = m.substr(0, nul);
  return m;
}

}  // namespace

std::string strip_accelerators(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool before_word = i + 1 < s.size() && alnum(s[i + 1]);
    const bool word_start = i == 0 || !alnum(s[i - 1]);
    if (c == '_' && before_word && word_start) continue;  // "_Save", "Speichern _unter" (not file_name)
    if (c == '&') {
      if (i + 1 < s.size() && s[i + 1] == '&') {
        out += '&';
        ++i;
        continue;
      }
      std::size_t j = i + 1;
      while (j < s.size() && j - i < 10 && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '#')) ++j;
      const bool entity = j < s.size() && s[j] == ';' && j > i + 1;
      if (before_word && !entity) continue;  // "&File", "Da&tei"
    }
    out += c;
  }
  return out;
}

std::vector<Document> gettext_documents(const std::filesystem::path& catalogues, const std::string& package) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (std::filesystem::is_directory(catalogues, ec))
    for (const auto& e : std::filesystem::recursive_directory_iterator(catalogues))
      if (e.is_regular_file() && e.path().extension() == ".mo") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<Document> out;
  for (const auto& f : files) {
    const Catalogue cat = read_mo(f);
    Document doc{"gettext", package + "/" + f.stem().string(), {}, cat.unconvertible};
    for (const Message& m : cat.messages) {
      const std::string_view id = singular(m.id), str = singular(m.str);
      if (id.find('\n') != std::string_view::npos || str.find('\n') != std::string_view::npos) continue;
      doc.units.push_back({strip_accelerators(id), strip_accelerators(str)});
    }
    if (!doc.units.empty() || doc.unconvertible) out.push_back(std::move(doc));
  }
  return out;
}

}  // namespace ctgrad::data::ende
