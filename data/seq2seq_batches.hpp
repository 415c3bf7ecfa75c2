// Batches of source-target pairs for an encoder-decoder (the Transformer's translation and copy
// tasks): padded batches with valid lengths, and an epoch's batches by count or by tokens.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ctgrad::data {

struct Seq2SeqExample {
  std::vector<std::int32_t> src, tgt;  // src ends with eos; tgt = bos ... eos
  std::string src_text, tgt_text;
};

// Sources [B, S], the decoder's input (tgt without its last token) [B, T] and its target (tgt
// without its first) [B, T], padded with pad_id, with their valid lengths.
struct Seq2SeqBatch {
  std::vector<std::int32_t> src, src_len, tgt_in, tgt_len, tgt_out;
  std::int64_t B = 0, S = 0, T = 0;
  std::int64_t tokens() const;  // the target tokens, padding left out
};
Seq2SeqBatch make_batch(const std::vector<Seq2SeqExample>& ex, std::span<const std::int64_t> idx, std::int32_t pad_id);

// The examples of an epoch (indices into `ex` from `members`), `batch` at a time, or with
// `tokens` > 0 as many as fit in `tokens` (rows x the longest side of the batch, padding included:
// the paper's batches by token count). Shuffled, then sorted by length within pools of (up to) 50
// batches, or the whole epoch for token batches (less padding), batch order shuffled again. A
// function of (seed, epoch): a resumed run sees the same.
std::vector<std::vector<std::int64_t>> epoch_batches(const std::vector<Seq2SeqExample>& ex, std::span<const std::int64_t> members,
                                                     std::int64_t batch, std::int64_t tokens, std::uint64_t seed, std::uint64_t epoch);

}  // namespace ctgrad::data
