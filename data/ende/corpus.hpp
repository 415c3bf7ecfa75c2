// The EN-DE corpus from Debian's own translations: documents of aligned units (data/ende/sources.hpp)
// made into sentence pairs (data/ende/align.hpp), de-duplicated and split by document, so that no
// help page, package description or catalogue is in two splits and no side of a held-out pair trains.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ctgrad/data/ende/align.hpp>
#include <ctgrad/data/ende/sources.hpp>

namespace ctgrad::data::ende {

struct CorpusPair {
  std::string en, de;
  std::uint32_t document = 0;  // into Corpus::documents
};

// Per source: what was read and what became of it.
struct SourceCount {
  std::string source;
  std::size_t documents = 0, units = 0, pairs = 0;  // pairs: candidates after sentence alignment
  std::size_t encoding = 0;                          // units dropped: not UTF-8 (or not convertible to it)
  std::size_t untranslated = 0, ratio = 0, placeholders = 0, other = 0, duplicates = 0, leaked = 0;
  std::size_t train = 0, validation = 0, test = 0;
};

struct Corpus {
  std::vector<std::string> documents;  // "source:id"
  std::vector<CorpusPair> train, validation, test;
  std::vector<SourceCount> counts;     // in the order the sources came
};

struct SplitOptions {
  Placeholders placeholders = Placeholders::keep;
  double validation = 0.02, test = 0.02;  // fractions of each source's documents, by a hash of the document
};

// Documents in any order (they are sorted by source and id first: the result does not depend on
// it). A document goes to test, validation or train by a hash of "source:id"; a pair seen before
// (both sides equal) is a duplicate; a training pair with a side equal to a side of a held-out pair
// is dropped (leaked), as is a validation pair sharing a side with a test pair. A unit that is not
// UTF-8 text is dropped (encoding), with those its reader could not convert.
Corpus make_corpus(std::vector<Document> docs, const SplitOptions& o = {});

// train.tsv, validation.tsv, test.tsv (en TAB de TAB document, one pair a line) and counts.tsv in
// `dir`, each written whole or not at all, once every pair is checked to be UTF-8 text without
// tabs or line breaks (a data_error naming the pair otherwise: nothing is written).
void write_corpus(const Corpus& c, const std::filesystem::path& dir);
// The counts as a table (what `ctgrad data ende` prints).
std::string count_table(const Corpus& c);

}  // namespace ctgrad::data::ende
