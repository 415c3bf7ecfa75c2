// The EN->DE corpus `ctgrad train transformer` trains on (its data key), split so that nothing of a
// held-out sentence trains, whichever sources are mixed.
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

#include <ctgrad/data/pairs.hpp>

namespace ctgrad::data {

struct EnDeCorpus {
  std::vector<SentencePair> train_sentences, train_phrases, validation, test;
  std::vector<SentencePair> wesnoth_test;  // the game's own test split (data=ding+wesnoth), scored apart
  std::size_t dropped = 0;                 // game pairs dropped for sharing a side with the other split
};

// data = "sentences": the dictionary's sentence pairs split by a hash of the English side.
// "ding": every pair of the dictionary split by entry (split_by_entry): validation and test are the
// sentences of held-out lines, phrases of training lines train too.
// "ding+wesnoth": and the game's dialogue (split_pairs of wesnoth_pairs), where a game training pair
// with a side of any pair of a held-out dictionary line is dropped, and so is a game test pair with
// a side that trains (the leakage test of tests/data checks both).
EnDeCorpus en_de_corpus(std::string_view data);

}  // namespace ctgrad::data
