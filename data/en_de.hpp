// The EN->DE corpus `ctgrad train transformer` trains on (its data key), split so that nothing of a
// held-out sentence trains, whichever sources are mixed.
#pragma once
#include <ctgrad/data/text_source.hpp>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <ctgrad/data/pairs.hpp>

namespace ctgrad::data {

struct NamedPairs {
  std::string name;  // "Wesnoth test", ...
  std::vector<SentencePair> pairs;
};

struct EnDeCorpus {
  std::vector<SentencePair> train_sentences, train_phrases, validation, test;
  std::vector<NamedPairs> other_tests;  // test sets of other sources, scored apart
  std::vector<std::string> held_sides;  // data=ding*: every side of every pair of a held-out dictionary line
  std::size_t dropped = 0;              // training (or game test) pairs dropped for sharing a side with a held-out pair
};

// The splits `ctgrad data ende` writes (data/ende/corpus.hpp): train.tsv, validation.tsv, test.tsv.
struct DebianSplits {
  std::vector<SentencePair> train, validation, test;
};
DebianSplits read_debian_corpus(const std::filesystem::path& dir);
std::filesystem::path debian_corpus_dir();  // $CTGRAD_DATA/ende/corpus (data/ende/fetch.hpp)

// At least 4 words, ending in . ! or ? (a label or a phrase otherwise).
bool sentence_like(std::string_view en);

// Debian's corpus with `base` (a data=ding+wesnoth corpus): Debian's splits train, validate and
// test, base's test sets are scored apart (the dictionary's and the game's); with train_base,
// base's training pairs train too. Sentence-like pairs are sentences, the rest phrases (mixed by
// phrase_weight). A training pair with a side equal to a side of any held-out pair of either source
// (base.held_sides included) is dropped.
EnDeCorpus with_debian(EnDeCorpus base, DebianSplits debian, bool train_base);

// data = "sentences": the dictionary's sentence pairs split by a hash of the English side.
// "ding": every pair of the dictionary split by entry (split_by_entry): validation and test are the
// sentences of held-out lines, phrases of training lines train too.
// "ding+wesnoth": and the game's dialogue (split_pairs of wesnoth_pairs), where a game training pair
// with a side of any pair of a held-out dictionary line is dropped, and so is a game test pair with
// a side that trains (the leakage test of tests/data checks both).
// "debian", "debian+ding+wesnoth": with_debian of the corpus `ctgrad data ende` wrote and of
// "ding+wesnoth", without or with the latter's training pairs. Anything else is a user's pairs
// (read_pairs: a TSV or JSON Lines file, a glob, pairs:SOURCE,TARGET), split by split_pairs.
EnDeCorpus en_de_corpus(std::string_view data, const PairOptions& pairs = {});

}  // namespace ctgrad::data
