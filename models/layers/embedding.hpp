// Token embeddings and positional encodings.
#pragma once
#include <ctgrad/graph/builder.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/index.hpp>
#include <ctgrad/ops/position.hpp>

namespace ctgrad::layers {

struct EmbeddingOptions {
  bool scale_by_sqrt_d_ = false;  // the original Transformer multiplies embeddings by sqrt(d_model)
  Init init_ = init::normal(1.0);
  CTGRAD_SETTER(EmbeddingOptions, bool, scale_by_sqrt_d)
  CTGRAD_SETTER(EmbeddingOptions, Init, init)
};

// The table "<scope>.weight" [vocab, d], for tying with an output projection.
constexpr Value embedding_table(const Scope& s, int vocab, int d, Init i = init::normal(1.0), Loc loc = Loc::current()) {
  return s.param("weight", {vocab, d}, i, loc);
}
// ids [...] -> [..., d] through a given table.
constexpr Value embed(Value table, Value ids, bool scale_by_sqrt_d = false, Loc loc = Loc::current()) {
  Value y = ctgrad::embedding(table, ids, loc);
  if (!scale_by_sqrt_d) return y;
  return scale(y, ops::const_sqrt(double(table.shape()[1].coef)), loc);
}
constexpr Value embedding(const Scope& s, Value ids, int vocab, int d, EmbeddingOptions o = {}, Loc loc = Loc::current()) {
  return embed(embedding_table(s, vocab, d, o.init_, loc), ids, o.scale_by_sqrt_d_, loc);
}

// x [Batch, Seq, d] + the paper's sinusoidal encoding (no parameters).
constexpr Value add_sinusoidal_positions(Value x, Loc loc = Loc::current()) {
  return add(x, sinusoidal_positions(x, int(x.shape().back(1).coef), 1, loc), loc);
}
// x [Batch, Seq, d] + learned positions "<scope>.weight" [max_len, d]; longer sequences are an error.
constexpr Value add_learned_positions(const Scope& s, Value x, int max_len, Init i = init::normal(0.02), Loc loc = Loc::current()) {
  Value table = s.param("weight", {max_len, x.shape().back(1)}, i, loc);
  return add(x, prefix_rows(table, x, 1, loc), loc);
}

}  // namespace ctgrad::layers
