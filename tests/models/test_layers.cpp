// Layers with options: whole blocks gradchecked in double, names, returned attention weights.
#include <catch2/catch.hpp>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/layers.hpp>

using namespace ctgrad;
using namespace ctgrad::layers;

namespace {
constexpr int D = 8;

// One block written once; the variants below differ only in the options passed.
constexpr Value block(const Scope& g, Value x, std::optional<Value> mask, MultiHeadAttentionOptions attn,
                      FeedForwardOptions ff, ResidualOptions res) {
  x = residual(g.scope("attn_block"), x, [&](Value h) { return multi_head_attention(g.scope("attn"), h, h, mask, attn); }, res);
  return residual(g.scope("ff_block"), x, [&](Value h) { return feed_forward(g.scope("ff"), h, ff); }, res);
}

constexpr auto gpt_block = [] {  // pre-norm, fused QKV, causal, GELU (tanh), dropout
  Builder g;
  Value x = g.input("x", {Batch, Seq, D}, {.grad = true});
  Value y = block(g, x, std::nullopt, MultiHeadAttentionOptions().heads(2).fused_qkv(true).causal(true).dropout(0.1),
                  FeedForwardOptions().d_ff(16).activation(Act::gelu_tanh).dropout(0.1),
                  ResidualOptions().norm(Norm::pre).dropout(0.1));
  g.loss(sum(y * g.input("probe", {Batch, Seq, D})));
  return g;
};
constexpr auto paper_block = [] {  // post-norm, padding mask, ReLU, the (x-mean)/(std+eps) norm
  Builder g;
  Value x = g.input("x", {Batch, Seq, D}, {.grad = true});
  Value len = g.input("len", {Batch}, {.dtype = DType::index});
  Value y = block(g, x, key_padding_mask(len, x), MultiHeadAttentionOptions().heads(4),
                  FeedForwardOptions().d_ff(16), ResidualOptions().norm(Norm::post).norm_kind(NormKind::layer_std_eps));
  g.loss(sum(y * g.input("probe", {Batch, Seq, D})));
  return g;
};
constexpr auto t5_block = [] {  // pre-norm RMS, relative position bias, gated GELU, no biases
  Builder g;
  Value x = g.input("x", {Batch, Seq, D}, {.grad = true});
  Value y = block(g, x, std::nullopt,
                  MultiHeadAttentionOptions().heads(2).bias(false).relative_bias(true).scale_scores(false)
                      .relative({.buckets = 8, .max_distance = 16}),
                  FeedForwardOptions().d_ff(12).activation(Act::gated_gelu).bias(false),
                  ResidualOptions().norm(Norm::pre).norm_kind(NormKind::rms));
  g.loss(sum(y * g.input("probe", {Batch, Seq, D})));
  return g;
};
static constexpr auto GPT = freeze<gpt_block>();
static constexpr auto PAPER = freeze<paper_block>();
static constexpr auto T5 = freeze<t5_block>();

template <const auto& G>
void require_gradcheck(RandomInputs in = {.seed = 3, .sym = {2, 5, 5, 1, 1, 1}, .index_range = 6}) {
  auto r = gradcheck<G>(in, {.max_per_tensor = 16});
  INFO(r.worst << "\n" << r.report);
  CHECK(r.checked > 50);
  REQUIRE(r.ok);
}
}  // namespace

TEST_CASE("whole blocks built from layers pass gradcheck in every configuration", "[models][layers]") {
  require_gradcheck<GPT>();
  require_gradcheck<PAPER>();
  require_gradcheck<T5>();
}

TEST_CASE("options change the parameters as the architecture says", "[models][layers]") {
  Program<GPT> gpt;
  Program<T5> t5;
  Program<PAPER> paper;
  auto names = [](auto& p) {
    std::vector<std::string> n;
    for (const auto& q : p.parameters()) n.emplace_back(q.name);
    return n;
  };
  CHECK(names(gpt) == std::vector<std::string>{"attn_block.norm.weight", "attn_block.norm.bias", "attn.qkv.weight", "attn.qkv.bias",
                                               "attn.wo.weight", "attn.wo.bias", "ff_block.norm.weight", "ff_block.norm.bias",
                                               "ff.fc1.weight", "ff.fc1.bias", "ff.fc2.weight", "ff.fc2.bias"});
  CHECK(names(t5) == std::vector<std::string>{"attn_block.norm.weight", "attn.wq.weight", "attn.wk.weight", "attn.wv.weight",
                                              "attn.relative_bias", "attn.wo.weight", "ff_block.norm.weight",
                                              "ff.wi_0.weight", "ff.wi_1.weight", "ff.wo.weight"});
  CHECK(paper.parameters().size() == 4 * 2 + 2 + 2 * 2 + 2);
}

constexpr auto with_weights = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, D});
  Value len = g.input("len", {Batch}, {.dtype = DType::index});
  Value w;
  g.output(multi_head_attention(g.scope("attn"), x, x, key_padding_mask(len, x), MultiHeadAttentionOptions().heads(2).causal(true), &w), "out");
  g.output(w, "weights");
  g.output(embedding(g.scope("emb"), len, 10, 4, EmbeddingOptions().scale_by_sqrt_d(true)), "emb");
  return g;
};
static constexpr auto WEIGHTS = freeze<with_weights>();

TEST_CASE("attention weights for heatmaps: rows sum to 1, masked and future keys get 0", "[models][layers]") {
  Program<WEIGHTS, double> p;
  fill_random_inputs(p, {.seed = 2, .sym = {2, 4, 4, 1, 1, 1}});
  std::vector<std::int32_t> len = {4, 2};
  p.set_input("len", std::span<const std::int32_t>(len), {2});
  p.forward(Mode::infer);
  auto w = p.output("weights");  // [2, 2, 4, 4]
  REQUIRE(w.numel == 64);
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 4; ++i) {
        double row = 0;
        for (int j = 0; j < 4; ++j) {
          const double v = w[((b * 2 + h) * 4 + i) * 4 + j];
          row += v;
          if (j > i || j >= len[std::size_t(b)]) CHECK(v == 0.0);
        }
        CHECK(row == Approx(1.0));
      }
  // Embeddings scaled by sqrt(d) = 2.
  auto e = p.output("emb");
  const auto& table = p.parameter("emb.weight").value;
  CHECK(e[0] == Approx(2 * table[4 * 4 + 0]));
}
