#include <ctgrad/data/ende/align.hpp>
#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/data/ende/sources.hpp>
#include <ctgrad/data/text.hpp>

#include <string_view>
#include <unordered_map>

namespace ctgrad::data::ende {
namespace {

struct Description {
  std::string package, md5, short_text;
  std::vector<std::string> paragraphs;  // empty strings: a paragraph with verbatim lines
};

std::string read_text(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) throw data_error("ctgrad: " + p.string() + " is missing (run ctgrad data ende to fetch it)");
  return read_text_file(p, p.string(), std::size_t(1) << 30);
}

// Records are separated by blank lines; a field's value continues on lines that start with a space.
std::vector<Description> parse(const std::string& text, std::string_view lang_field) {
  std::vector<Description> out;
  Description d;
  bool in_desc = false, verbatim = false;
  std::string para;
  auto end_paragraph = [&] {
    if (in_desc) d.paragraphs.push_back(verbatim ? std::string() : collapse_space(para));
    para.clear();
    verbatim = false;
  };
  auto end_record = [&] {
    if (in_desc && !para.empty()) end_paragraph();
    if (!d.md5.empty() && !d.short_text.empty()) out.push_back(std::move(d));
    d = {};
    in_desc = false;
    para.clear();
    verbatim = false;
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (line.empty()) {
      end_record();
      if (end == text.size()) break;
      continue;
    }
    if (line[0] == ' ') {
      if (!in_desc) continue;
      if (line == " .") end_paragraph();
      else if (line.size() > 1 && line[1] == ' ') verbatim = true;
      else para.append(line.substr(1)).push_back(' ');
      continue;
    }
    if (in_desc && !para.empty()) end_paragraph();
    in_desc = false;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
    if (key == "Package") d.package = value;
    else if (key == "Description-md5") d.md5 = value;
    else if (key == lang_field) d.short_text = collapse_space(value), in_desc = true;
  }
  end_record();  // a file without a final blank line
  return out;
}

}  // namespace

std::vector<Document> ddtp_documents(const std::filesystem::path& translation_en, const std::filesystem::path& translation_de) {
  const auto en = parse(read_text(translation_en), "Description-en");
  const auto de = parse(read_text(translation_de), "Description-de");
  if (en.empty() || de.empty())
    throw data_error("ctgrad: no descriptions in " + (en.empty() ? translation_en : translation_de).string() + " (not a DDTP Translation file?)");
  std::unordered_map<std::string_view, const Description*> by_md5;
  for (const Description& e : en) by_md5.emplace(e.md5, &e);
  std::vector<Document> out;
  std::unordered_map<std::string_view, bool> seen;  // an md5 listed twice in the German file pairs once
  for (const Description& g : de) {
    const auto it = by_md5.find(g.md5);
    if (it == by_md5.end() || !seen.emplace(g.md5, true).second) continue;
    const Description& e = *it->second;
    Document doc{"ddtp", g.package.empty() ? e.package : g.package, {{e.short_text, g.short_text}}};
    if (e.paragraphs.size() == g.paragraphs.size())
      for (std::size_t i = 0; i < e.paragraphs.size(); ++i)
        if (!e.paragraphs[i].empty() && !g.paragraphs[i].empty()) doc.units.push_back({e.paragraphs[i], g.paragraphs[i]});
    out.push_back(std::move(doc));
  }
  return out;
}

}  // namespace ctgrad::data::ende
