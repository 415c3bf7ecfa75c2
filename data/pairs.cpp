#include <ctgrad/data/pairs.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/base/random.hpp>

#include <algorithm>
#include <fstream>
#include <string_view>
#include <unordered_set>

namespace ctgrad::data {
namespace {

std::vector<std::string> split_on(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t at = s.find(sep, pos);
    out.push_back(s.substr(pos, at == std::string::npos ? std::string::npos : at - pos));
    if (at == std::string::npos) return out;
    pos = at + sep.size();
  }
}

// Removes {..} and [..] annotations and trims spaces.
std::string clean(const std::string& s) {
  std::string out;
  int depth = 0;
  for (char c : s) {
    if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && depth > 0) --depth;
    else if (depth == 0) out += c;
  }
  std::string collapsed;
  for (char c : out)
    if (!(c == ' ' && (collapsed.empty() || collapsed.back() == ' '))) collapsed += c;
  while (!collapsed.empty() && collapsed.back() == ' ') collapsed.pop_back();
  return collapsed;
}

bool sentence(const std::string& s) {
  if (s.size() < 8) return false;
  const unsigned char first = static_cast<unsigned char>(s[0]);
  const bool capital = (first >= 'A' && first <= 'Z') || first >= 0xC3;  // ASCII capital, or Ä/Ö/Ü (UTF-8)
  const char last = s.back();
  return capital && (last == '.' || last == '!' || last == '?') && std::count(s.begin(), s.end(), ' ') >= 2;
}

}  // namespace

std::vector<DingPair> ding_pairs(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file))
    throw data_error("ctgrad: EN-DE pairs need the Debian package trans-de-en (" + file.string() +
                     " is missing): run scripts/setup.sh --tests or apt-get install trans-de-en");
  std::ifstream in(file);
  std::vector<DingPair> pairs;
  std::string line;
  std::int32_t entry = -1;
  while (std::getline(in, line)) {
    ++entry;
    if (line.empty() || line[0] == '#') continue;
    const std::size_t at = line.find(" :: ");
    if (at == std::string::npos) continue;
    const auto de = split_on(line.substr(0, at), " | "), en = split_on(line.substr(at + 4), " | ");
    if (de.size() != en.size()) continue;  // not aligned: skip rather than guess
    for (std::size_t i = 0; i < de.size(); ++i) {
      const std::string d = clean(split_on(de[i], "; ")[0]), e = clean(split_on(en[i], "; ")[0]);
      if (d.empty() || e.empty()) continue;
      pairs.push_back({{e, d}, entry, sentence(d) && sentence(e)});
    }
  }
  if (pairs.size() < 10000) throw data_error("ctgrad: " + file.string() + " gave only " + std::to_string(pairs.size()) + " pairs");
  return pairs;
}

EntrySplit split_by_entry(const std::vector<DingPair>& pairs, double validation, double test) {
  // The side of a line: by a hash of its number and first pair, stable for an unchanged file.
  auto side = [&](const DingPair& p) {
    const double u = double(random::key(std::uint64_t(p.entry), p.pair.en + "\t" + p.pair.de) >> 11) * 0x1.0p-53;
    return u < test ? 2 : u < test + validation ? 1 : 0;
  };
  std::vector<int> line_side;  // by entry, from the line's first pair
  // Hashed, not ordered: only membership is asked (std::set's string compares were most of the
  // time of a split of the 300,000 pairs).
  std::unordered_set<std::string_view> held_en, held_de;  // views of `pairs`
  std::int32_t last = -1;
  int current = 0;
  for (const DingPair& p : pairs) {
    if (p.entry != last) current = side(p), last = p.entry;
    line_side.push_back(current);
    if (current) held_en.insert(p.pair.en), held_de.insert(p.pair.de);
  }
  EntrySplit s;
  for (std::size_t i = 0; i < pairs.size(); ++i)
    if (line_side[i] && (s.held_out_entries.empty() || s.held_out_entries.back() != pairs[i].entry)) s.held_out_entries.push_back(pairs[i].entry);
  std::unordered_set<std::string> seen[3];  // duplicates dropped within each side
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const DingPair& p = pairs[i];
    if (line_side[i] == 0 && (held_en.count(p.pair.en) || held_de.count(p.pair.de))) {
      ++s.dropped;
      continue;
    }
    if (!seen[line_side[i]].insert(p.pair.en + "\t" + p.pair.de).second) continue;
    if (line_side[i] == 2) {
      if (p.sentence) s.test.push_back(p.pair);
    } else if (line_side[i] == 1) {
      if (p.sentence) s.validation.push_back(p.pair);
    } else {
      (p.sentence ? s.train_sentences : s.train_phrases).push_back(p.pair);
    }
  }
  return s;
}

std::vector<SentencePair> ding_sentence_pairs(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file))
    throw data_error("ctgrad: EN-DE pairs need the Debian package trans-de-en (" + file.string() +
                     " is missing): run scripts/setup.sh --tests or apt-get install trans-de-en");
  std::ifstream in(file);
  std::vector<SentencePair> pairs;
  std::unordered_set<std::string> seen;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t at = line.find(" :: ");
    if (at == std::string::npos) continue;
    const auto de = split_on(line.substr(0, at), " | "), en = split_on(line.substr(at + 4), " | ");
    if (de.size() != en.size()) continue;  // not aligned: skip rather than guess
    for (std::size_t i = 0; i < de.size(); ++i) {
      const std::string d = clean(split_on(de[i], "; ")[0]), e = clean(split_on(en[i], "; ")[0]);
      if (!sentence(d) || !sentence(e) || !seen.insert(e + "\t" + d).second) continue;
      pairs.push_back({e, d});
    }
  }
  if (pairs.size() < 1000) throw data_error("ctgrad: " + file.string() + " gave only " + std::to_string(pairs.size()) + " sentence pairs");
  return pairs;
}

PairSplit split_pairs(const std::vector<SentencePair>& pairs, double validation, double test) {
  PairSplit s;
  for (const auto& p : pairs) {
    const double u = double(random::key(0, p.en) >> 11) * 0x1.0p-53;
    (u < test ? s.test : u < test + validation ? s.validation : s.train).push_back(p);
  }
  return s;
}

std::vector<std::int64_t> shuffled(std::int64_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[std::size_t(i)] = i;
  const std::uint64_t key = random::key(seed, epoch, 0x73687566ull);
  for (std::int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
    std::swap(idx[std::size_t(i)], idx[std::size_t(random::bits(key, std::uint64_t(i)) % std::uint64_t(i + 1))]);
  return idx;
}

PaddedBatch pad(std::span<const std::vector<std::int32_t>> seqs, std::int32_t pad_id, std::int64_t max_len) {
  PaddedBatch b;
  b.batch = std::int64_t(seqs.size());
  for (const auto& s : seqs) b.length = std::max(b.length, std::min<std::int64_t>(std::int64_t(s.size()), max_len));
  b.length = std::max<std::int64_t>(b.length, 1);
  b.ids.assign(std::size_t(b.batch * b.length), pad_id);
  for (std::int64_t i = 0; i < b.batch; ++i) {
    const auto& s = seqs[std::size_t(i)];
    const std::int64_t n = std::min<std::int64_t>(std::int64_t(s.size()), b.length);
    std::copy(s.begin(), s.begin() + n, b.ids.begin() + i * b.length);
    b.lengths.push_back(std::int32_t(n));
  }
  return b;
}

}  // namespace ctgrad::data
