// Masked-language-model data (BERT, RoBERTa): sequences packed from whole text units, and batches
// whose masks follow the paper: per sequence 15% of the non-special tokens are selected (at least
// one); a selected token becomes [MASK] with probability 0.8, a random regular token (never a
// special one) with 0.1, and stays itself with 0.1. Optionally whole words are selected together.
// Everything is a function of (seed, batch number, row): a resumed run sees the same batches and
// masks, and each batch number gets new masks (dynamic masking, as RoBERTa).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ctgrad::data {

// The ids of the specials; regular tokens are [first_regular, vocab).
struct MlmSpecials {
  std::int32_t pad = 0, unk = 1, cls = 2, sep = 3, mask = 4;
  std::int32_t first_regular = 5, vocab = 0;
};

struct MaskingOptions {
  double select = 0.15;    // of a sequence's non-special tokens
  double to_mask = 0.8;    // of the selected: [MASK]
  double to_random = 0.1;  // of the selected: a random regular token (the rest stay)
  bool whole_word = false; // select whole words (a word starts at a token marked in word_starts)
};

// Packs consecutive units (verses, paragraphs: each a list of token ids) into sequences of at most
// `max_tokens` tokens, never splitting a unit unless it alone is longer (then it is cut into
// pieces). The order of the units is kept (RoBERTa's FULL-SENTENCES within a document).
std::vector<std::vector<std::int32_t>> pack_units(const std::vector<std::vector<std::int32_t>>& units, std::size_t max_tokens);

// One masked row: `tokens` holds [CLS] ... [SEP] (changed in place); the selected positions and
// their original ids are appended to picks (as offset + position) and targets. `key` decides
// everything. Returns how many were selected.
std::size_t mask_row(std::span<std::int32_t> tokens, std::uint64_t key, const MaskingOptions& o, const MlmSpecials& sp,
                     std::span<const std::uint8_t> word_starts, std::int32_t offset, std::vector<std::int32_t>& picks,
                     std::vector<std::int32_t>& targets);

class MlmBatches {
 public:
  // `sequences` (kept by reference) hold regular tokens only; a row is [CLS] sequence [SEP],
  // padded with [PAD] to the longest row of its batch. word_starts[id] != 0 marks the tokens that
  // start a word (whole-word masking; may be empty otherwise).
  MlmBatches(const std::vector<std::vector<std::int32_t>>& sequences, MlmSpecials specials, MaskingOptions options, std::int64_t batch,
             std::uint64_t seed, std::vector<std::uint8_t> word_starts = {});
  // Next-sentence prediction (BERT's second objective): rows are pairs [CLS] A [SEP] B [SEP] with
  // segments 0 for [CLS] A [SEP] and 1 for B [SEP]; A is the drawn sequence, and B is the sequence
  // after it with probability 1/2 (label 1: has_next[i] != 0 says sequence i + 1 continues i in
  // the same document), otherwise a random other sequence (label 0). Masks as for single rows.
  void next_sentence(std::vector<std::uint8_t> has_next);
  // Training batch n: `batch` rows drawn at random, masks of their own.
  void draw(std::uint64_t n);
  // Validation: rows first .. first + count - 1 in order, with fixed masks (the same each time).
  void rows(std::int64_t first, std::int64_t count);

  std::int64_t batch() const { return rows_; }
  std::int64_t seq() const { return seq_; }  // the longest row of the batch, specials included
  std::span<const std::int32_t> ids() const { return {ids_.data(), std::size_t(rows_ * seq_)}; }
  std::span<const std::int32_t> segments() const { return {segments_.data(), std::size_t(rows_ * seq_)}; }
  std::span<const std::int32_t> lengths() const { return {lengths_.data(), std::size_t(rows_)}; }
  std::span<const std::int32_t> picks() const { return picks_; }
  std::span<const std::int32_t> targets() const { return targets_; }
  std::span<const std::int32_t> next_labels() const { return next_labels_; }  // [rows], next-sentence mode
  std::size_t size() const { return sequences_.size(); }

 private:
  void build(std::span<const std::size_t> which, std::uint64_t mask_key);
  const std::vector<std::vector<std::int32_t>>& sequences_;
  MlmSpecials sp_;
  MaskingOptions o_;
  std::int64_t batch_, rows_ = 0, seq_ = 0;
  std::uint64_t seed_;
  std::vector<std::uint8_t> word_starts_;
  std::vector<std::uint8_t> has_next_;
  std::vector<std::int32_t> ids_, segments_, lengths_, picks_, targets_, next_labels_;
};

}  // namespace ctgrad::data
