// The inputs of the encoder-decoder models (models/transformer.hpp, models/seq2seq.hpp): the same
// batches feed both.
#pragma once
#include <ctgrad/graph/builder.hpp>

namespace ctgrad::models::translation_inputs {
inline constexpr InputName src{"src", DType::index};              // [Batch, SeqKV] source ids, padded
inline constexpr InputName src_len{"src_len", DType::index};      // [Batch] source lengths
inline constexpr InputName tgt_in{"tgt_in", DType::index};        // [Batch, Seq] <s> y1 .. y(T-1), padded
inline constexpr InputName tgt_len{"tgt_len", DType::index};      // [Batch] target lengths
inline constexpr InputName tgt_out{"tgt_out", DType::index};      // [Batch, Seq] y1 .. yT (pad ignored)
inline constexpr InputName ids{"ids", DType::index};              // step: the new target tokens
inline constexpr InputName positions{"positions", DType::index};  // step: [Seq] their positions
}  // namespace ctgrad::models::translation_inputs
