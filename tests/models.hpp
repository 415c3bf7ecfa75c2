// Small graphs shared by the tests.
#pragma once
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/linear.hpp>

namespace ctgrad::testing {

// MLP block with a residual: x + fc2(relu(fc1(x))), then a classifier head.
constexpr Value mlp_block(const Scope& g, Value x, int d, int hidden) {
  Value h = relu(layers::linear(g.scope("fc1"), x, hidden));
  return layers::linear(g.scope("fc2"), h, d) + x;
}

template <int D, int Hidden, int Classes, int Blocks>
constexpr auto mlp_classifier = [] {
  Builder g;
  Value x = g.input("x", {Batch, D});
  Value y = g.input("y", {Batch}, {.dtype = DType::index});
  for (int i = 0; i < Blocks; ++i) x = mlp_block(g.scope("block", i), x, D, Hidden);
  Value logits = layers::linear(g.scope("head"), x, Classes);
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, y));
  return g;
};

// Single-head attention over a padded batch: softmax(q k^T / sqrt(d) masked) v, projected.
constexpr Value attention(const Scope& g, Value x, Value key_mask, int d) {
  Value q = layers::linear(g.scope("wq"), x, d);
  Value k = layers::linear(g.scope("wk"), x, d);
  Value v = layers::linear(g.scope("wv"), x, d);
  Value scores = scale(matmul(q, k, {.trans_b = true}), 1.0 / __builtin_sqrt(double(d)));  // [B,T,T]
  Value p = softmax(masked_fill(scores, key_mask, -1e9));  // key_mask [B,1,T]
  return layers::linear(g.scope("wo"), matmul(p, v), d);
}

template <int D>
constexpr auto attention_model = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, D}, {.grad = true});
  Value mask = g.input("mask", {Batch, 1, Seq});
  Value target = g.input("target", {Batch, Seq, D});
  Value out = attention(g.scope("attn"), x, mask, D);
  g.loss(mse(out, target));
  return g;
};

}  // namespace ctgrad::testing
