#include <ctgrad/data/en_de.hpp>
#include <ctgrad/data/gettext.hpp>
#include <ctgrad/data/text.hpp>

#include <string>
#include <string_view>
#include <unordered_set>

namespace ctgrad::data {

EnDeCorpus en_de_corpus(std::string_view data) {
  EnDeCorpus c;
  if (data == "sentences") {
    PairSplit s = split_pairs(ding_sentence_pairs());
    c.train_sentences = std::move(s.train), c.validation = std::move(s.validation), c.test = std::move(s.test);
    return c;
  }
  if (data != "ding" && data != "ding+wesnoth")
    throw data_error("ctgrad: unknown EN-DE data '" + std::string(data) + "' (sentences, ding or ding+wesnoth)");
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
  for (SentencePair& p : w.test) {
    if (train_en.count(p.en) || train_de.count(p.de)) {
      ++c.dropped;
      continue;
    }
    c.wesnoth_test.push_back(std::move(p));
  }
  return c;
}

}  // namespace ctgrad::data
