#include <ctgrad/data/gettext.hpp>
#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/data/text.hpp>

#include <algorithm>
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

}  // namespace

std::vector<Message> read_mo(const std::filesystem::path& file) {
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
  std::vector<Message> out;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string id = string_at(ids, i), str = string_at(strs, i);
    if (id.empty()) continue;  // the header
    out.push_back({std::move(id), std::move(str)});
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
    for (const Message& m : read_mo(f)) {
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
