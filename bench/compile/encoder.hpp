// Transformer blocks for the compile-time benchmark: post-norm encoder and decoder layers as in
// the original paper, built from fine-grained ops (about 24 op nodes and 16 parameters per encoder
// layer).
#pragma once
#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/models/layers/norm.hpp>

namespace bench {
using namespace ctgrad;

// Multi-head attention from fine-grained ops (projections, head split, masked softmax, merge):
// the benchmark measures graphs of many small nodes, so it does not use the fused attention op.
namespace layers {
using namespace ctgrad::layers;
namespace detail {
constexpr double inv_sqrt(double v) { return 1 / ops::const_sqrt(v); }
// [B, T, d] -> [B, heads, T, d/heads]
constexpr Value split_heads(Value x, int heads, const Loc& loc) {
  const Shape s = x.shape();
  const Dim dh = s[2].coef / heads;
  return transpose(reshape(x, {s[0], s[1], heads, dh}, loc), 1, 2, loc);
}
}  // namespace detail

constexpr Value multi_head_attention(const Scope& s, Value q_in, Value kv_in, Value mask, int heads,
                                     Loc loc = Loc::current()) {
  const Shape qs = q_in.shape();
  const Dim d = qs.back(1);
  const int dh = int(d.coef) / heads;
  Value q = detail::split_heads(linear(s.scope("wq"), q_in, d), heads, loc);
  Value k = detail::split_heads(linear(s.scope("wk"), kv_in, d), heads, loc);
  Value v = detail::split_heads(linear(s.scope("wv"), kv_in, d), heads, loc);
  Value scores = scale(matmul(q, k, {.trans_b = true}, loc), detail::inv_sqrt(dh), loc);
  Value p = softmax(masked_fill(scores, mask, -1e9, loc), loc);
  Value o = transpose(matmul(p, v, {}, loc), 1, 2, loc);  // [B, Tq, heads, dh]
  return linear(s.scope("wo"), reshape(o, {qs[0], qs[1], d}, loc), d);
}

}  // namespace layers

constexpr Value ffn(const Scope& g, Value x, int d, int d_ff) {
  return layers::linear(g.scope("fc2"), relu(layers::linear(g.scope("fc1"), x, d_ff)), d);
}

constexpr Value encoder_layer(const Scope& g, Value x, Value mask, int d, int heads, int d_ff) {
  Value a = layers::norm(g.scope("ln1"), x + layers::multi_head_attention(g.scope("attn"), x, x, mask, heads));
  return layers::norm(g.scope("ln2"), a + ffn(g, a, d, d_ff));
}

constexpr Value decoder_layer(const Scope& g, Value y, Value memory, Value causal, Value src_mask, int d, int heads,
                              int d_ff) {
  Value a = layers::norm(g.scope("ln1"), y + layers::multi_head_attention(g.scope("self"), y, y, causal, heads));
  Value c = layers::norm(g.scope("ln2"),
                               a + layers::multi_head_attention(g.scope("cross"), a, memory, src_mask, heads));
  return layers::norm(g.scope("ln3"), c + ffn(g, c, d, d_ff));
}

template <int Layers>
constexpr auto encoder = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 512});
  Value mask = g.input("mask", {Batch, 1, 1, Seq});
  Value target = g.input("target", {Batch, Seq, 512});
  for (int i = 0; i < Layers; ++i) x = encoder_layer(g.scope("enc", i), x, mask, 512, 8, 2048);
  g.loss(mse(x, target));
  return g;
};

template <int Layers>
constexpr auto encoder_decoder = [] {
  Builder g;
  Value src = g.input("src", {Batch, SeqKV, 512});
  Value tgt = g.input("tgt", {Batch, Seq, 512});
  Value src_mask = g.input("src_mask", {Batch, 1, 1, SeqKV});
  Value causal = g.input("causal", {1, 1, Seq, Seq});
  Value target = g.input("target", {Batch, Seq, 512});
  Value m = src;
  for (int i = 0; i < Layers; ++i) m = encoder_layer(g.scope("enc", i), m, src_mask, 512, 8, 2048);
  Value y = tgt;
  for (int i = 0; i < Layers; ++i) y = decoder_layer(g.scope("dec", i), y, m, causal, src_mask, 512, 8, 2048);
  g.loss(mse(y, target));
  return g;
};

// Instantiates the program and runs one training step, so the measured translation unit holds
// everything a user's would.
template <const auto& G>
int run() {
  Program<G> p(Options{.seed = 1});
  RandomInputs in;
  in.sym = {2, 8, 8, 1, 1, 1};
  in.index_range = 2;
  fill_random_inputs(p, in);
  p.forward();
  p.backward();
  std::printf("%d nodes, %zu parameters, train plan %d buffers -> %d slots, loss %.4f\n", G.size,
              p.parameters().size(), p.train_plan.n_buffers, p.train_plan.n_slots, double(p.loss()));
  // Activation + gradient memory of a training step at Batch 8, Seq = SeqKV = 128, fp32:
  // planned (slots) against every buffer kept apart.
  const std::array<std::int64_t, kMaxSymbols> sym{8, 128, 128, 1, 1, 1};
  for (const auto* plan : {&Program<G>::train_plan, &Program<G>::infer_plan}) {
    std::vector<std::int64_t> slot(std::size_t(plan->n_slots), 0);
    std::int64_t apart = 0;
    for (int b = 0; b < plan->n_buffers; ++b) {
      const Buffer& buf = plan->buffers[std::size_t(b)];
      const std::int64_t bytes = buf.elems.eval(sym) * 4;
      apart += bytes;
      slot[std::size_t(buf.slot)] = std::max(slot[std::size_t(buf.slot)], bytes);
    }
    std::int64_t planned = 0;
    for (auto v : slot) planned += v;
    std::printf("  %s plan at B=8,T=128: %.0f MiB planned vs %.0f MiB unshared\n",
                plan->training ? "train" : "infer", planned / 1048576.0, apart / 1048576.0);
  }
  return 0;
}
}  // namespace bench
