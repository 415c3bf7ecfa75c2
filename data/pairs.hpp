// EN-DE sentence pairs from the Ding dictionary (Debian trans-de-en), deterministic splits, seeded
// shuffling and padded batches with valid lengths.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ctgrad::data {

struct SentencePair {
  std::string en, de;
};

// Aligned sub-entries of the dictionary where both sides are sentences (a capital first letter,
// final . ! or ?, at least three words), first synonym only, {..} and [..] annotations removed,
// duplicates dropped. About 19,000 pairs.
std::vector<SentencePair> ding_sentence_pairs(const std::filesystem::path& file = "/usr/share/trans/de-en");

struct PairSplit {
  std::vector<SentencePair> train, validation, test;
};

// Every aligned pair of the dictionary (about 390,000: words, phrases and the ~19,000 sentences),
// first synonym only, annotations removed, each with the line (entry) it comes from.
struct DingPair {
  SentencePair pair;
  std::int32_t entry = 0;  // the dictionary line
  bool sentence = false;   // both sides are sentences (as ding_sentence_pairs keeps them)
};
std::vector<DingPair> ding_pairs(const std::filesystem::path& file = "/usr/share/trans/de-en");

// A split by dictionary entry, so that nothing of a held-out sentence's entry trains: each line
// goes to train, validation or test by a hash of its text; validation and test are the sentences
// of their lines; train is every pair of the training lines (sentences and phrases) whose English
// or German side is not a side of any held-out line's pair (a phrase shared with a test line
// would leak it). Duplicates dropped.
struct EntrySplit {
  std::vector<SentencePair> train_sentences, train_phrases, validation, test;
  std::vector<std::int32_t> held_out_entries;  // the lines of validation and test
  std::size_t dropped = 0;  // training pairs dropped for sharing a side with a held-out line
};
EntrySplit split_by_entry(const std::vector<DingPair>& pairs, double validation = 0.05, double test = 0.05);
// Each pair goes by a hash of its English side: stable whatever else the file holds.
PairSplit split_pairs(const std::vector<SentencePair>& pairs, double validation = 0.05, double test = 0.05);

// A permutation of [0, n) for (seed, epoch), the same on any machine.
std::vector<std::int64_t> shuffled(std::int64_t n, std::uint64_t seed, std::uint64_t epoch);

// Sequences padded to the longest (at most max_len; longer ones are cut) with pad_id:
// ids [batch, length] and the valid lengths [batch], as key_padding_mask() takes them.
struct PaddedBatch {
  std::int64_t batch = 0, length = 0;
  std::vector<std::int32_t> ids, lengths;
};
PaddedBatch pad(std::span<const std::vector<std::int32_t>> seqs, std::int32_t pad_id, std::int64_t max_len);

}  // namespace ctgrad::data
