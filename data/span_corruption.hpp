// T5's span corruption (Raffel et al. 2020, section 3.1.4): a fraction of a sequence's tokens
// (noise density 0.15) in spans of mean length 3 is dropped from the input, each span replaced by
// one sentinel; the target is each sentinel followed by the tokens it replaced, then EOS.
//   tokens   The quick brown fox jumps over the lazy dog
//   inputs   The <extra_id_0> fox jumps over <extra_id_1> dog </s>
//   targets  <extra_id_0> quick brown <extra_id_1> the lazy </s>
// Sentinels come from the end of the vocabulary: <extra_id_0> = vocab - 1, <extra_id_1> = vocab - 2...
//
// The counts are the reference's (t5.data.preprocessors.random_spans_noise_mask): noise =
// round(length * density) clamped to [1, length - 1], spans = max(1, round(noise / mean span)), in
// binary32 arithmetic rounding halves to even as tf.math.round does. The placement is not: the
// reference lays out non-noise/noise span pairs from the start, so its last span always ends the
// sequence and a sequence short enough for one span (length <= 30 at density 0.15) has that span at
// the end every time. Here the span pairs are laid on a circle, rotated by a uniform random offset,
// and cut at position 0: every position is noise with probability noise/length exactly, at every
// length. The price: when the cut falls inside a noise span (probability (noise - spans) / length),
// it becomes two spans, one ending the sequence and one starting it, so a row has spans or spans + 1.
// The lengths (span_corruption_lengths) allow for the extra span.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace ctgrad::data {

struct SpanCorruptionOptions {
  double noise_density = 0.15;
  double mean_span = 3.0;
  bool reference_placement = false;  // Google's layout (kept span first, a noise span last), for comparison only
};

struct SpanCounts {
  std::int64_t noise = 0, spans = 0;  // noise tokens; noise spans before the cut
};
// The reference's counts for a sequence of `length` tokens (length >= 2).
SpanCounts span_counts(std::int64_t length, const SpanCorruptionOptions& o);

// The reference's random_spans_helper, with one more span for the cut: the most raw tokens whose
// corrupted input (tokens kept + one sentinel per span + EOS) fits `inputs_length`, and the
// longest target that many tokens can give (sentinels + noise + EOS).
struct SpanLengths {
  std::int64_t tokens = 0, inputs = 0, targets = 0;
};
SpanLengths span_corruption_lengths(std::int64_t inputs_length, const SpanCorruptionOptions& o);

// The noise mask of a sequence of `length` tokens (1: noise), a function of `key` alone.
std::vector<std::uint8_t> noise_mask(std::int64_t length, std::uint64_t key, const SpanCorruptionOptions& o);

// Inputs and targets from tokens and their mask (replaces their contents). `first_sentinel` is
// <extra_id_0>'s id (the vocabulary's last); span i gets first_sentinel - i. Returns the spans;
// more than `sentinels` spans is an error (the next ids are ordinary tokens).
std::int64_t corrupt_spans(std::span<const std::int32_t> tokens, std::span<const std::uint8_t> mask, std::int32_t first_sentinel,
                           std::int32_t eos, std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets,
                           std::int64_t sentinels = 100);

// Batches for an encoder-decoder: rows drawn from `sequences` (raw tokens, each at most
// span_corruption_lengths(...).tokens long), corrupted with masks keyed by (seed, batch number,
// row): dynamic, and the same on resume. Inputs padded with `pad` to the longest of the batch; the
// decoder reads pad (T5's start token) followed by the targets shifted right.
class SpanCorruptionBatches {
 public:
  struct Ids {
    std::int32_t pad = 0, eos = 1, first_sentinel = 0;
    std::int64_t sentinels = 100;
  };
  SpanCorruptionBatches(const std::vector<std::vector<std::int32_t>>& sequences, Ids ids, SpanCorruptionOptions o, std::int64_t batch,
                        std::uint64_t seed);
  void draw(std::uint64_t n);                            // training batch n: random rows
  void rows(std::int64_t first, std::int64_t count);    // validation: these rows, fixed masks

  std::int64_t batch() const { return rows_; }
  std::int64_t input_length() const { return in_len_; }
  std::int64_t target_length() const { return out_len_; }
  std::span<const std::int32_t> inputs() const { return inputs_; }            // [batch, input_length]
  std::span<const std::int32_t> input_lengths() const { return input_lengths_; }
  std::span<const std::int32_t> decoder_inputs() const { return dec_in_; }    // [batch, target_length]
  std::span<const std::int32_t> targets() const { return dec_out_; }          // [batch, target_length], pad after EOS
  std::span<const std::int32_t> target_lengths() const { return target_lengths_; }
  std::int64_t noise_tokens() const { return noise_; }  // in the last batch
  std::size_t size() const { return sequences_.size(); }

 private:
  // Row masks keyed by the row of the batch (training) or by the sequence (validation).
  void build(std::span<const std::size_t> which, std::uint64_t key, bool per_sequence);
  const std::vector<std::vector<std::int32_t>>& sequences_;
  Ids ids_;
  SpanCorruptionOptions o_;
  std::int64_t batch_, rows_ = 0, in_len_ = 0, out_len_ = 0, noise_ = 0;
  std::uint64_t seed_;
  std::vector<std::int32_t> inputs_, input_lengths_, dec_in_, dec_out_, target_lengths_;
};

}  // namespace ctgrad::data
