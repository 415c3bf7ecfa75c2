// BERT (Devlin et al. 2019; d2l's chapter on large-scale pretraining), declared in the DSL:
//   x = drop(LN(tok[ids] + pos[0..S) + seg[segments]))                     [Batch, Seq, d]
//   per layer layer.<l>:  x = ln_1(x + drop(attn(x, key padding mask)))    post-norm (the paper's)
//                         x = ln_2(x + drop(ffn(x)))                       GELU (erf), d_ff wide
// Masked language modelling (bert_mlm): only the picked positions go through the head
//   h = x.flat[picks]                                                      [Picks, d]
//   logits = LN(gelu(dense(h))) tok^T + mlm.bias                           [Picks, vocab]
//   loss = cross_entropy(logits, targets)    (targets of the picked positions only, as BERT's
//                                             max_predictions_per_seq gather: no logits are
//                                             computed for the 85% of positions that are not scored)
// With next_sentence, pretraining also classifies whether segment B follows A (labels [Batch]):
//   loss += cross_entropy(nsp.out(tanh(pooler(x[:, 0]))), labels)     the pooler is the classifier's
// Classification (bert_classifier), on the <cls> vector (or, by the `pool` input, the tokens' mean):
//   logits = cls.out(drop(tanh(pooler(pool x))))                           [Batch, classes]
// The encoder's parameter names are the same in both graphs: a pretrained checkpoint's encoder
// loads into the classifier by name, its head starts new.
//
// Initialisation: weights N(0, init_std) truncated at 2 sd, biases 0, norms 1 (BERT's). Hyper-
// parameters (Program::set_hyper, `--set`): dropout (0.1), init_std (0.02), norm_eps (1e-12, as
// BERT), label_smoothing (0). Pre-norm is an option of the config (BertConfig::pre_norm).
//
// Inputs: ids [Batch, Seq] (padded with any id), segments [Batch, Seq] (0 for A, 1 for B),
// lengths [Batch] (tokens before the padding: keys past it are masked), and for the MLM graph
// picks [Picks] (flat indices b * Seq + t of the scored positions) and targets [Picks] (their
// original ids); for the classifier labels [Batch] and pool [Batch, Seq] (see bert_classifier).
#pragma once
#include <ctgrad/graph/program.hpp>
#include <ctgrad/ops/ops.hpp>
#include <ctgrad/models/bert_config.hpp>
#include <ctgrad/models/decoding.hpp>
#include <ctgrad/models/layers/layers.hpp>

namespace ctgrad::models {

// Picks: how many positions of a batch the MLM head scores (a runtime dim).
inline constexpr Dim Picks = Sym3;

namespace bert_inputs {
inline constexpr InputName ids{"ids", DType::index};            // [Batch, Seq]
inline constexpr InputName segments{"segments", DType::index};  // [Batch, Seq] 0: sentence A, 1: sentence B
inline constexpr InputName lengths{"lengths", DType::index};    // [Batch] tokens before the padding
inline constexpr InputName picks{"picks", DType::index};        // [Picks] flat positions b * Seq + t
inline constexpr InputName targets{"targets", DType::index};    // [Picks] the original ids there
inline constexpr InputName labels{"labels", DType::index};      // [Batch] classifier: class ids
inline constexpr InputName pool{"pool"};                         // [Batch, Seq] classifier: weights of the pooled positions
}  // namespace bert_inputs

namespace detail {

// The embeddings and the encoder layers; `tok` receives the token table (tied to the MLM head).
constexpr Value bert_encode(Builder& g, const BertConfig& c, Value* tok) {
  using namespace layers;
  Value ids = g.input(bert_inputs::ids, {Batch, Seq});
  Value segments = g.input(bert_inputs::segments, {Batch, Seq});
  Value lengths = g.input(bert_inputs::lengths, {Batch});
  const Real p = g.hyper("dropout", 0.1), std = g.hyper("init_std", 0.02), eps = g.hyper("norm_eps", 1e-12);
  const Init w = init::truncated_normal(std);
  *tok = embedding_table(g.scope("tok"), c.vocab, c.d_model, w);
  Value x = add_learned_positions(g.scope("pos"), embed(*tok, ids), c.context, w);
  x = add(x, embedding(g.scope("seg"), segments, c.segments, c.d_model, {.init = w}));
  x = dropout(norm(g.scope("emb_norm"), x, {.eps = eps}), p);
  const Value mask = key_padding_mask(lengths, Seq);  // [B, 1, 1, S]
  const TransformerBlockOptions block{.attention = {.heads = c.heads, .dropout = p, .init = w, .out_init = w},
                                      .ffn = {.d_ff = c.d_ff, .activation = Act::gelu, .init = w, .out_init = w},
                                      .placement = c.pre_norm ? Norm::pre : Norm::post,
                                      .norm = {.eps = eps},
                                      .dropout = p,
                                      .names = {.self = "attn", .ffn = "ffn"}};
  for (int l = 0; l < c.n_layer; ++l) x = transformer_block(g.scope("layer", l), {.x = x, .mask = mask}, block).x;
  if (c.pre_norm) x = norm(g.scope("final_norm"), x, {.eps = eps});  // pre-norm leaves the stream unnormalised
  return x;  // [B, S, d]
}

}  // namespace detail

// Masked language modelling: the loss over the picked positions.
constexpr Builder bert_mlm(const BertConfig& C) {
  using namespace layers;
  Builder g;
  Value tok;
  Value x = detail::bert_encode(g, C, &tok);
  Value picks = g.input(bert_inputs::picks, {Picks});
  Value targets = g.input(bert_inputs::targets, {Picks});
  const Init w = init::truncated_normal(g.hyper("init_std", 0.02));
  Value h = index_select(reshape(x, {Batch * Seq, C.d_model}), 0, picks);  // [P, d]
  h = gelu(linear(g.scope("mlm.dense"), h, C.d_model, {.init = w}));
  h = norm(g.scope("mlm.norm"), h, {.eps = g.hyper("norm_eps", 1e-12)});
  const Value tied = tied_logits(h, tok);
  Value logits = add(tied, g.scope("mlm").param("bias", {C.vocab}, init::zeros()));  // [P, vocab]
  g.output(logits, "logits");
  Value loss = cross_entropy(logits, targets, {.label_smoothing = g.hyper("label_smoothing", 0)});
  if (C.next_sentence) {  // is B the sentence after A? From the pooled <cls> vector
    Value is_next = g.input(bert_inputs::labels, {Batch});
    Value cls = reshape(slice(x, 1, 0, 1), {Batch, C.d_model});
    Value nsp = linear(g.scope("nsp.out"), tanh(linear(g.scope("pooler"), cls, C.d_model, {.init = w})), 2, {.init = w});  // [B, 2]
    g.output(nsp, "nsp_logits");
    loss = add(loss, cross_entropy(nsp, is_next));
  }
  g.loss(loss);
  return g;
}

// Sequence classification (fine-tuning) from a weighted sum of the final vectors: BERT's <cls>
// vector when `pool` is 1 at position 0 and 0 elsewhere, their mean when it is 1/n on n tokens.
// A runtime input, so both readouts share one compiled graph.
constexpr Builder bert_classifier(const BertConfig& C, int Classes) {
  using namespace layers;
  Builder g;
  Value tok;
  Value x = detail::bert_encode(g, C, &tok);
  Value labels = g.input(bert_inputs::labels, {Batch});
  Value pool = g.input(bert_inputs::pool, {Batch, Seq});
  const Init w = init::truncated_normal(g.hyper("init_std", 0.02));
  Value cls = reshape(matmul(reshape(pool, {Batch, 1, Seq}), x), {Batch, C.d_model});  // [B, d]
  Value pooled = tanh(linear(g.scope("pooler"), cls, C.d_model, {.init = w}));
  Value logits = linear(g.scope("cls.out"), dropout(pooled, g.hyper("dropout", 0.1)), Classes, {.init = w});  // [B, classes]
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, labels, {.label_smoothing = g.hyper("label_smoothing", 0)}));
  return g;
}

}  // namespace ctgrad::models
