#include <ctgrad/data/text_source.hpp>
#include <ctgrad/base/utf8.hpp>
#include <ctgrad/data/en_de.hpp>
#include <ctgrad/data/ende/fetch.hpp>
#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/data/gettext.hpp>
#include <ctgrad/data/text.hpp>

#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_set>

namespace ctgrad::data {

namespace {
std::string hex_byte(char c) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", static_cast<unsigned char>(c));
  return b;
}
}  // namespace

std::filesystem::path debian_corpus_dir() { return ende::ende_dir() / "corpus"; }

DebianSplits read_debian_corpus(const std::filesystem::path& dir) {
  DebianSplits d;
  for (auto [name, out] : {std::pair{"train.tsv", &d.train}, std::pair{"validation.tsv", &d.validation}, std::pair{"test.tsv", &d.test}}) {
    const std::filesystem::path file = dir / name;
    if (!std::filesystem::exists(file))
      throw data_error("ctgrad: the EN-DE corpus from Debian is not built (" + file.string() + " is missing): run ctgrad data ende");
    const std::string text = ende::read_text_file(file, "the EN-DE corpus", std::size_t(1) << 32);
    std::size_t line = 0;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = std::min(text.find('\n', at), text.size());
      const std::string_view l(text.data() + at, end - at);
      ++line, at = end + 1;
      const std::size_t t1 = l.find('\t'), t2 = t1 == l.npos ? l.npos : l.find('\t', t1 + 1);
      if (t2 == l.npos || t1 == 0 || t2 == t1 + 1)
        throw data_error("ctgrad: " + file.string() + " line " + std::to_string(line) + " is not 'English TAB German TAB document': rebuild it with ctgrad data ende");
      if (const std::size_t bad = text::invalid_utf8_at(l); bad != l.npos)
        throw data_error("ctgrad: " + file.string() + " line " + std::to_string(line) + " is not UTF-8 text (byte " + hex_byte(l[bad]) + " at column " +
                         std::to_string(bad + 1) + "): rebuild it with ctgrad data ende");
      out->push_back({std::string(l.substr(0, t1)), std::string(l.substr(t1 + 1, t2 - t1 - 1))});
    }
  }
  if (d.train.empty() || d.validation.empty() || d.test.empty()) throw data_error("ctgrad: the EN-DE corpus in " + dir.string() + " has an empty split: rebuild it with ctgrad data ende");
  return d;
}

bool sentence_like(std::string_view en) {
  if (en.empty() || (en.back() != '.' && en.back() != '!' && en.back() != '?')) return false;
  int words = 0;
  bool in_word = false;
  for (char ch : en) {
    const bool space = ch == ' ' || ch == '\t';
    words += !space && !in_word, in_word = !space;
  }
  return words >= 4;
}

EnDeCorpus with_debian(EnDeCorpus base, DebianSplits debian, bool train_base) {
  EnDeCorpus c;
  c.dropped = base.dropped;  // the game's pairs dropped in base
  c.validation = std::move(debian.validation), c.test = std::move(debian.test);
  c.other_tests.push_back({"Ding test", std::move(base.test)});
  for (NamedPairs& t : base.other_tests) c.other_tests.push_back(std::move(t));
  std::unordered_set<std::string_view> held;  // views of c's held-out pairs and of base.held_sides (neither changes below)
  for (const auto* part : {&c.validation, &c.test, &base.validation})
    for (const SentencePair& p : *part) held.insert(p.en), held.insert(p.de);
  for (const NamedPairs& t : c.other_tests)
    for (const SentencePair& p : t.pairs) held.insert(p.en), held.insert(p.de);
  for (const std::string& s : base.held_sides) held.insert(s);
  auto add = [&](std::vector<SentencePair>& from, bool split_by_form, bool phrases) {
    for (SentencePair& p : from) {
      if (held.count(p.en) || held.count(p.de)) {
        ++c.dropped;
        continue;
      }
      const bool phrase = split_by_form ? !sentence_like(p.en) : phrases;
      (phrase ? c.train_phrases : c.train_sentences).push_back(std::move(p));
    }
  };
  add(debian.train, true, false);
  if (train_base) add(base.train_sentences, false, false), add(base.train_phrases, false, true);
  return c;
}

EnDeCorpus en_de_corpus(std::string_view data, const PairOptions& pair_options) {
  if (data == "debian" || data == "debian+ding+wesnoth") {
    DebianSplits d = read_debian_corpus(debian_corpus_dir());
    return with_debian(en_de_corpus("ding+wesnoth"), std::move(d), data != "debian");
  }
  EnDeCorpus c;
  if (data == "sentences") {
    PairSplit s = split_pairs(ding_sentence_pairs());
    c.train_sentences = std::move(s.train), c.validation = std::move(s.validation), c.test = std::move(s.test);
    return c;
  }
  if (data != "ding" && data != "ding+wesnoth") {  // a user's pairs (data/text_source.hpp)
    PairSplit u = split_pairs(read_pairs(std::string(data), pair_options));
    if (u.validation.empty() || u.test.empty())
      throw data_error("ctgrad: data " + std::string(data) + " holds too few pairs (" + std::to_string(u.train.size() + u.validation.size() + u.test.size()) +
                       ") to hold out validation and test pairs (5% each, by a hash of the source side)");
    c.train_sentences = std::move(u.train), c.validation = std::move(u.validation), c.test = std::move(u.test);
    return c;
  }
  const std::vector<DingPair> pairs = ding_pairs();
  EntrySplit s = split_by_entry(pairs);
  c.train_sentences = std::move(s.train_sentences), c.train_phrases = std::move(s.train_phrases);
  c.validation = std::move(s.validation), c.test = std::move(s.test);
  if (data == "ding") return c;
  // Sets of views of `pairs` and of c's training pairs (neither changes while they are used).
  std::unordered_set<std::string_view> held_en, held_de;  // every side of every pair of a held-out dictionary line
  const std::unordered_set<std::int32_t> held(s.held_out_entries.begin(), s.held_out_entries.end());
  for (const DingPair& p : pairs)
    if (held.count(p.entry)) held_en.insert(p.pair.en), held_de.insert(p.pair.de);
  for (auto side : held_en) c.held_sides.emplace_back(side);
  for (auto side : held_de) c.held_sides.emplace_back(side);
  PairSplit w = split_pairs(wesnoth_pairs());
  for (SentencePair& p : w.train) {
    if (held_en.count(p.en) || held_de.count(p.de)) {
      ++c.dropped;
      continue;
    }
    c.train_sentences.push_back(std::move(p));
  }
  std::unordered_set<std::string_view> train_en, train_de;
  for (const auto* part : {&c.train_sentences, &c.train_phrases})
    for (const SentencePair& p : *part) train_en.insert(p.en), train_de.insert(p.de);
  NamedPairs& game = c.other_tests.emplace_back(NamedPairs{"Wesnoth test", {}});
  for (SentencePair& p : w.test) {
    if (train_en.count(p.en) || train_de.count(p.de)) {
      ++c.dropped;
      continue;
    }
    game.pairs.push_back(std::move(p));
  }
  return c;
}

}  // namespace ctgrad::data
