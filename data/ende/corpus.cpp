#include <ctgrad/base/random.hpp>
#include <ctgrad/base/utf8.hpp>
#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/data/ende/corpus.hpp>
#include <ctgrad/data/text.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_set>

namespace ctgrad::data::ende {

Corpus make_corpus(std::vector<Document> docs, const SplitOptions& o) {
  std::sort(docs.begin(), docs.end(), [](const Document& a, const Document& b) { return std::tie(a.source, a.id) < std::tie(b.source, b.id); });
  Corpus c;
  std::map<std::string, std::size_t> count_at;
  auto count_of = [&](const std::string& source) -> SourceCount& {
    const auto [it, fresh] = count_at.emplace(source, c.counts.size());
    if (fresh) c.counts.push_back({.source = source});
    return c.counts[it->second];
  };
  // Candidates with their split (0 train, 1 validation, 2 test) and source.
  struct Candidate {
    CorpusPair p;
    int split;
    std::size_t source;
  };
  std::vector<Candidate> cand;
  std::unordered_set<std::string> seen;  // en \t de
  for (const Document& d : docs) {
    SourceCount& n = count_of(d.source);
    const std::size_t si = count_at[d.source];
    ++n.documents;
    std::string name = d.source + ":" + d.id;
    for (char& ch : name)
      if (ch == '\t' || ch == '\n' || ch == '\r') ch = ' ';  // a TSV field
    const double u = double(random::key(0x656e6465, name) >> 11) * 0x1.0p-53;
    const int split = u < o.test ? 2 : u < o.test + o.validation ? 1 : 0;
    const auto doc = std::uint32_t(c.documents.size());
    c.documents.push_back(name);
    n.units += d.unconvertible, n.encoding += d.unconvertible;
    for (const Unit& unit : d.units) {
      ++n.units;
      if (!text::valid_utf8(unit.en) || !text::valid_utf8(unit.de)) {
        ++n.encoding;
        continue;
      }
      for (auto& [en, de] : align_paragraph(unit.en, unit.de)) {
        ++n.pairs;
        switch (check_pair(en, de, o.placeholders)) {
          case Reject::none: break;
          case Reject::untranslated: ++n.untranslated; continue;
          case Reject::ratio: ++n.ratio; continue;
          case Reject::placeholders: ++n.placeholders; continue;
          default: ++n.other; continue;
        }
        if (!seen.insert(en + '\t' + de).second) {
          ++n.duplicates;
          continue;
        }
        cand.push_back({{std::move(en), std::move(de), doc}, split, si});
      }
    }
  }
  // Sides of held-out pairs: none of them may train; a test side may not validate.
  std::unordered_set<std::string> test_sides, held_sides;
  for (const Candidate& x : cand)
    if (x.split == 2) test_sides.insert("e" + x.p.en), test_sides.insert("d" + x.p.de);
  held_sides = test_sides;
  for (const Candidate& x : cand)
    if (x.split == 1) held_sides.insert("e" + x.p.en), held_sides.insert("d" + x.p.de);
  for (Candidate& x : cand) {
    SourceCount& n = c.counts[x.source];
    const auto& sides = x.split == 0 ? held_sides : test_sides;
    if (x.split < 2 && (sides.count("e" + x.p.en) || sides.count("d" + x.p.de))) {
      ++n.leaked;
      continue;
    }
    (x.split == 0 ? ++n.train : x.split == 1 ? ++n.validation : ++n.test);
    (x.split == 0 ? c.train : x.split == 1 ? c.validation : c.test).push_back(std::move(x.p));
  }
  return c;
}

std::string count_table(const Corpus& c) {
  std::string t;
  char line[512];
  std::snprintf(line, sizeof line, "%-12s %9s %9s %8s %9s %9s %7s %8s %7s %9s %7s %9s %10s %8s\n", "source", "documents", "units", "encoding",
                "pairs", "untransl.", "ratio", "placeh.", "other", "duplicate", "leaked", "train", "validation", "test");
  t += line;
  SourceCount all{.source = "all"};
  auto row = [&](const SourceCount& n) {
    std::snprintf(line, sizeof line, "%-12s %9zu %9zu %8zu %9zu %9zu %7zu %8zu %7zu %9zu %7zu %9zu %10zu %8zu\n", n.source.c_str(), n.documents,
                  n.units, n.encoding, n.pairs, n.untranslated, n.ratio, n.placeholders, n.other, n.duplicates, n.leaked, n.train, n.validation, n.test);
    t += line;
  };
  for (const SourceCount& n : c.counts) {
    row(n);
    all.documents += n.documents, all.units += n.units, all.encoding += n.encoding, all.pairs += n.pairs, all.untranslated += n.untranslated, all.ratio += n.ratio;
    all.placeholders += n.placeholders, all.other += n.other, all.duplicates += n.duplicates, all.leaked += n.leaked;
    all.train += n.train, all.validation += n.validation, all.test += n.test;
  }
  if (c.counts.size() > 1) row(all);
  return t;
}

void write_corpus(const Corpus& c, const std::filesystem::path& dir) {
  for (const auto* split : {&c.train, &c.validation, &c.test})
    for (const CorpusPair& p : *split)
      for (const std::string* side : {&p.en, &p.de})
        if (!text::valid_utf8(*side) || side->find_first_of("\t\n\r") != std::string::npos)
          throw data_error("ctgrad: the EN-DE corpus would hold a side that is not one line of UTF-8 text (document " + c.documents[p.document] +
                           "): nothing written");
  std::filesystem::create_directories(dir);
  auto tsv = [&](const std::vector<CorpusPair>& pairs) {
    std::string s;
    for (const CorpusPair& p : pairs) s.append(p.en).append("\t").append(p.de).append("\t").append(c.documents[p.document]).append("\n");
    return s;
  };
  checkpoint::write_atomically(dir / "train.tsv", tsv(c.train));
  checkpoint::write_atomically(dir / "validation.tsv", tsv(c.validation));
  checkpoint::write_atomically(dir / "test.tsv", tsv(c.test));
  checkpoint::write_atomically(dir / "counts.tsv", count_table(c));
}

}  // namespace ctgrad::data::ende
