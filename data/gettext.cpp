#include <ctgrad/data/gettext.hpp>
#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/base/utf8.hpp>
#include <ctgrad/data/text.hpp>

#include <iconv.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>

namespace ctgrad::data {
namespace {

std::uint32_t read_u32(const std::string& b, std::size_t at, bool swap) {
  std::uint32_t v = 0;
  std::memcpy(&v, b.data() + at, 4);
  return swap ? __builtin_bswap32(v) : v;
}

// Drops the markup the game's strings use for emphasis; anything between < and > goes.
std::string strip_tags(const std::string& s) {
  std::string out;
  bool in_tag = false;
  for (char c : s) {
    if (c == '<') in_tag = true;
    else if (c == '>' && in_tag) in_tag = false;
    else if (!in_tag) out += c;
  }
  return out;
}

std::string collapse(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The charset a catalogue's header declares ("Content-Type: text/plain; charset=ISO-8859-1").
std::string declared_charset(const std::string& header) {
  std::string lower = header;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  const std::size_t at = lower.find("charset=");
  if (at == std::string::npos) return "";
  const std::size_t from = at + 8, to = header.find_first_of(" \t\n;", from);
  return header.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

bool ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Text in one charset as UTF-8 (iconv, no transliteration: a byte sequence the charset lacks fails).
class ToUtf8 {
 public:
  explicit ToUtf8(const std::string& charset) {
    std::string lower = charset;
    for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
    utf8_ = lower == "utf-8" || lower == "utf8";
    if (!utf8_ && !charset.empty()) cd_ = ::iconv_open("UTF-8", charset.c_str());
  }
  ~ToUtf8() {
    if (cd_ != iconv_t(-1)) ::iconv_close(cd_);
  }
  ToUtf8(const ToUtf8&) = delete;
  ToUtf8& operator=(const ToUtf8&) = delete;
  // False when `s` is not text of the charset (or the charset is unknown and s is not ASCII).
  bool convert(std::string& s) {
    if (utf8_ || ascii(s)) return text::valid_utf8(s);
    if (cd_ == iconv_t(-1)) return false;
    ::iconv(cd_, nullptr, nullptr, nullptr, nullptr);  // the initial shift state
    std::string out(s.size() * 4 + 8, '\0');
    char* in = s.data();
    char* to = out.data();
    std::size_t in_left = s.size(), out_left = out.size();
    if (::iconv(cd_, &in, &in_left, &to, &out_left) == std::size_t(-1) || in_left != 0) return false;
    if (::iconv(cd_, nullptr, nullptr, &to, &out_left) == std::size_t(-1)) return false;
    out.resize(out.size() - out_left);
    if (!text::valid_utf8(out)) return false;
    s = std::move(out);
    return true;
  }

 private:
  bool utf8_ = false;
  iconv_t cd_ = iconv_t(-1);
};

}  // namespace

Catalogue read_mo(const std::filesystem::path& file) {
  std::string b;
  try {  // a regular file only: a FIFO among the catalogues would block the read
    const std::vector<std::byte> bytes = checkpoint::read_regular_file(file, "ctgrad: the catalogue " + file.string(), std::size_t(1) << 28);
    b.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } catch (const checkpoint::format_error& e) {
    throw data_error(e.what());
  }
  auto bad = [&](const std::string& what) { return data_error("ctgrad: " + file.string() + " is not a gettext .mo catalogue: " + what); };
  if (b.size() < 28) throw bad("shorter than its header");
  std::uint32_t magic = 0;
  std::memcpy(&magic, b.data(), 4);
  const bool swap = magic == 0xde120495u;
  if (magic != 0x950412deu && !swap) throw bad("wrong magic number");
  const std::uint32_t revision = read_u32(b, 4, swap), n = read_u32(b, 8, swap), ids = read_u32(b, 12, swap), strs = read_u32(b, 16, swap);
  if ((revision >> 16) > 1) throw bad("unknown major revision " + std::to_string(revision >> 16));
  auto table_fits = [&](std::uint32_t at) { return std::uint64_t(at) + std::uint64_t(n) * 8 <= b.size(); };
  if (!table_fits(ids) || !table_fits(strs)) throw bad("its string tables run past the end of the file");
  auto string_at = [&](std::uint32_t table, std::uint32_t i) {
    const std::uint32_t len = read_u32(b, table + 8 * i, swap), off = read_u32(b, table + 8 * i + 4, swap);
    if (std::uint64_t(off) + len >= b.size()) throw bad("string " + std::to_string(i) + " runs past the end of the file");
    return b.substr(off, len);
  };
  Catalogue out;
  for (std::uint32_t i = 0; i < n; ++i)
    if (string_at(ids, i).empty()) out.charset = declared_charset(string_at(strs, i));  // the header
  ToUtf8 to_utf8(out.charset);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string id = string_at(ids, i), str = string_at(strs, i);
    if (id.empty()) continue;
    if (!text::valid_utf8(id) || !to_utf8.convert(str)) {
      ++out.unconvertible;
      continue;
    }
    out.messages.push_back({std::move(id), std::move(str)});
  }
  return out;
}

std::filesystem::path wesnoth_dir() {
  const char* root = std::getenv("CTGRAD_DATA");
  return std::filesystem::path(root && *root ? root : "/var/cache/ctgrad") / "wesnoth" / "de";
}

std::vector<SentencePair> wesnoth_pairs(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw data_error("ctgrad: the Wesnoth EN-DE dialogue is not set up (" + dir.string() + " is missing): run bash scripts/setup_wesnoth.sh");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".mo") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw data_error("ctgrad: " + dir.string() + " holds no .mo catalogues: run bash scripts/setup_wesnoth.sh");
  std::vector<SentencePair> pairs;
  std::set<std::string> seen;
  for (const auto& f : files)
    for (const Message& m : read_mo(f).messages) {
      std::string id = m.id, str = m.str;
      if (const auto ctx = id.find('\x04'); ctx != std::string::npos) id = id.substr(ctx + 1);
      id = id.substr(0, id.find('\0'));  // a plural: its singular forms
      str = str.substr(0, str.find('\0'));
      const std::string en = collapse(strip_tags(id)), de = collapse(strip_tags(str));
      if (en.empty() || de.empty() || en == de) continue;
      if (en.find_first_of("${}~") != std::string::npos || de.find_first_of("${}~") != std::string::npos) continue;
      if (!seen.insert(en + "\t" + de).second) continue;
      pairs.push_back({en, de});
    }
  return pairs;
}

}  // namespace ctgrad::data
