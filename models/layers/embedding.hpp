// Token embeddings and positional encodings.
#pragma once
#include <ctgrad/graph/builder.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/index.hpp>
#include <ctgrad/ops/matmul.hpp>
#include <ctgrad/ops/position.hpp>

namespace ctgrad::layers {

struct EmbeddingOptions {
  bool scale_by_sqrt_d = false;  // the original Transformer multiplies embeddings by sqrt(d_model)
  Init init = init::normal(1.0);
};

// The table "<scope>.weight" [vocab, d], for tying with an output projection (see tied_logits).
constexpr Value embedding_table(const Scope& s, int vocab, int d, Init i = init::normal(1.0)) {
  const auto at = s.enter();
  return s.param("weight", {vocab, d}, i);
}
// ids [...] -> [..., d] through a given table.
constexpr Value embed(Value table, Value ids, bool scale_by_sqrt_d = false, Loc loc = Loc::current()) {
  Value y = ctgrad::embedding(table, ids, loc);
  if (!scale_by_sqrt_d) return y;
  return scale(y, ops::const_sqrt(double(table.shape()[1].coef)), loc);
}
constexpr Value embedding(const Scope& s, Value ids, int vocab, int d, EmbeddingOptions o = {}) {
  const auto at = s.enter();
  return embed(embedding_table(s, vocab, d, o.init), ids, o.scale_by_sqrt_d);
}
// The output projection tied to an embedding table (GPT-2, the original Transformer, BERT's MLM
// head): x [..., d] -> logits [..., vocab] = x table^T.
constexpr Value tied_logits(Value x, Value table, Loc loc = Loc::current()) { return matmul(x, table, {.trans_b = true}, loc); }

// x [Batch, Seq, d] + the paper's sinusoidal encoding (no parameters).
constexpr Value add_sinusoidal_positions(Value x, Loc loc = Loc::current()) {
  const Shape s = x.shape();
  return add(x, sinusoidal_positions(Scope{x.b, {}, loc}, s[s.rank - 2], int(s.back(1).coef), loc), loc);
}
// x [Batch, Seq, d] + learned positions "<scope>.weight" [max_len, d]; longer sequences are an error.
constexpr Value add_learned_positions(const Scope& s, Value x, int max_len, Init i = init::normal(0.02)) {
  const auto at = s.enter();
  const Shape sh = x.shape();
  Value table = s.param("weight", {max_len, sh.back(1)}, i);
  return add(x, prefix_rows(table, sh[sh.rank - 2]));
}

}  // namespace ctgrad::layers
