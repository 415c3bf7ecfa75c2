#include <ctgrad/data/ende/align.hpp>
#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/data/ende/sources.hpp>
#include <ctgrad/data/text.hpp>

#include <algorithm>
#include <cctype>
#include <map>

namespace ctgrad::data::ende {
namespace {

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = char(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

// A tag at s[at] == '<': its name (lower case), whether it closes or closes itself, its end.
struct Tag {
  std::string name;
  bool closing = false, self_closing = false;
  std::size_t end = 0;  // one past '>'
  std::string_view attrs;
};
bool parse_tag(std::string_view s, std::size_t at, Tag& t) {
  std::size_t i = at + 1;
  t.closing = i < s.size() && s[i] == '/';
  if (t.closing) ++i;
  const std::size_t name0 = i;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' || s[i] == ':')) ++i;
  if (i == name0) return false;
  t.name = lower(s.substr(name0, i - name0));
  char quote = 0;
  std::size_t j = i;
  for (; j < s.size(); ++j) {
    if (quote) {
      if (s[j] == quote) quote = 0;
    } else if (s[j] == '"' || s[j] == '\'') {
      quote = s[j];
    } else if (s[j] == '>') {
      break;
    }
  }
  if (j >= s.size()) return false;
  t.attrs = s.substr(i, j - i);
  t.self_closing = j > 0 && s[j - 1] == '/';
  t.end = j + 1;
  return true;
}

// The value of attribute `name` in a tag's attribute text ("" when absent).
std::string attribute(std::string_view attrs, std::string_view name) {
  std::size_t i = 0;
  while ((i = attrs.find(name, i)) != std::string_view::npos) {
    const bool starts = i == 0 || std::isspace(static_cast<unsigned char>(attrs[i - 1]));
    std::size_t j = i + name.size();
    if (starts && j + 1 < attrs.size() && attrs[j] == '=' && (attrs[j + 1] == '"' || attrs[j + 1] == '\'')) {
      const std::size_t e = attrs.find(attrs[j + 1], j + 2);
      if (e != std::string_view::npos) return std::string(attrs.substr(j + 2, e - j - 2));
    }
    i = j;
  }
  return {};
}

void append_utf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) out += char(cp);
  else if (cp < 0x800) out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
  else if (cp < 0x10000) out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
  else if (cp < 0x110000)
    out += char(0xF0 | (cp >> 18)), out += char(0x80 | ((cp >> 12) & 0x3F)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
}

// The end of the element whose start tag ends at `from` (same-named tags nested inside counted).
std::size_t element_end(std::string_view s, std::size_t from, const std::string& name, std::size_t* inner_end) {
  int depth = 1;
  std::size_t i = from;
  while ((i = s.find('<', i)) != std::string_view::npos) {
    Tag t;
    if (!parse_tag(s, i, t)) {
      ++i;
      continue;
    }
    if (t.name == name && !t.self_closing) depth += t.closing ? -1 : 1;
    if (depth == 0) {
      *inner_end = i;
      return t.end;
    }
    i = t.end;
  }
  *inner_end = s.size();
  return s.size();
}

// id -> the text of the element carrying it, for par_id* / hd_id* ids; ids seen twice map to "".
std::map<std::string, std::string> elements_by_id(std::string_view page) {
  std::map<std::string, std::string> out;
  std::size_t i = 0;
  while ((i = page.find('<', i)) != std::string_view::npos) {
    Tag t;
    if (!parse_tag(page, i, t) || t.closing || t.self_closing) {
      ++i;
      continue;
    }
    const std::string id = attribute(t.attrs, "id");
    if (id.rfind("par_id", 0) != 0 && id.rfind("hd_id", 0) != 0) {
      i = t.end;
      continue;
    }
    std::size_t inner_end = 0;
    const std::size_t end = element_end(page, t.end, t.name, &inner_end);
    const auto [it, fresh] = out.emplace(id, html_text(page.substr(t.end, inner_end - t.end)));
    if (!fresh) it->second.clear();
    i = end;
  }
  return out;
}

std::string read_page(const std::filesystem::path& p) { return read_text_file(p, "the help page " + p.string(), std::size_t(1) << 26); }

}  // namespace

std::string html_text(std::string_view s) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '<') {
      Tag t;
      if (parse_tag(s, i, t)) {
        if (!t.closing && !t.self_closing && attribute(t.attrs, "class") == "MAC") {
          std::size_t inner = 0;
          i = element_end(s, t.end, t.name, &inner);
          continue;
        }
        if (t.name == "br" || t.name == "p" || t.name == "li" || t.name == "td") out += ' ';
        i = t.end;
        continue;
      }
    }
    if (s[i] == '&') {
      const std::size_t semi = s.find(';', i);
      if (semi != std::string_view::npos && semi - i <= 10) {
        const std::string_view name = s.substr(i + 1, semi - i - 1);
        unsigned long cp = 0;
        if (name == "amp") cp = '&';
        else if (name == "lt") cp = '<';
        else if (name == "gt") cp = '>';
        else if (name == "quot") cp = '"';
        else if (name == "apos") cp = '\'';
        else if (name == "nbsp") cp = ' ';
        else if (name.size() > 1 && name[0] == '#') {
          const bool hex = name[1] == 'x' || name[1] == 'X';
          cp = std::strtoul(std::string(name.substr(hex ? 2 : 1)).c_str(), nullptr, hex ? 16 : 10);
        }
        if (cp) {
          append_utf8(out, cp);
          i = semi + 1;
          continue;
        }
      }
    }
    out += s[i++];
  }
  return collapse_space(out);
}

std::vector<Document> libreoffice_documents(const std::filesystem::path& en_help, const std::filesystem::path& de_help) {
  std::error_code ec;
  for (const auto& d : {en_help, de_help})
    if (!std::filesystem::is_directory(d, ec)) throw data_error("ctgrad: the LibreOffice help folder " + d.string() + " is missing (run ctgrad data ende)");
  std::vector<std::filesystem::path> pages;
  for (const auto& e : std::filesystem::recursive_directory_iterator(en_help / "text"))
    if (e.is_regular_file() && e.path().extension() == ".html") pages.push_back(std::filesystem::relative(e.path(), en_help));
  std::sort(pages.begin(), pages.end());
  std::vector<Document> out;
  for (const auto& rel : pages) {
    if (!std::filesystem::is_regular_file(de_help / rel, ec)) continue;
    const auto en = elements_by_id(read_page(en_help / rel)), de = elements_by_id(read_page(de_help / rel));
    Document doc{"libreoffice", rel.generic_string(), {}};
    for (const auto& [id, text] : en) {
      const auto it = de.find(id);
      if (it != de.end() && !text.empty() && !it->second.empty()) doc.units.push_back({text, it->second});
    }
    if (!doc.units.empty()) out.push_back(std::move(doc));
  }
  return out;
}

}  // namespace ctgrad::data::ende
