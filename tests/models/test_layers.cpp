// Layers with options: whole blocks gradchecked in double, names, returned attention weights, the
// location errors name.
#include <catch2/catch.hpp>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/layers.hpp>

using namespace ctgrad;
using namespace ctgrad::layers;

namespace {
constexpr int D = 8;

// One block function; the variants below differ only in the options passed.
constexpr auto gpt_block = [] {  // pre-norm, fused QKV, causal, GELU (tanh), dropout
  Builder g;
  Value x = g.input("x", {Batch, Seq, D}, {.grad = true});
  const TransformerBlockOptions o{.attention = {.heads = 2, .dropout = 0.1, .causal = true, .fused_qkv = true},
                                  .ffn = {.d_ff = 16, .activation = Act::gelu_tanh, .dropout = 0.1},
                                  .placement = Norm::pre,
                                  .dropout = 0.1};
  Value y = transformer_block(g.scope("b"), {.x = x}, o).x;
  g.loss(sum(y * g.input("probe", {Batch, Seq, D})));
  return g;
};
constexpr auto paper_block = [] {  // post-norm, padding mask, ReLU, the (x-mean)/(std+eps) norm, cross-attention
  Builder g;
  Value x = g.input("x", {Batch, Seq, D}, {.grad = true});
  Value memory = g.input("memory", {Batch, SeqKV, D}, {.grad = true});
  Value len = g.input("len", {Batch}, {.dtype = DType::index});
  const TransformerBlockOptions o{.attention = {.heads = 4, .causal = true},
                                  .ffn = {.d_ff = 16},
                                  .placement = Norm::post,
                                  .norm = {.kind = NormKind::layer_std_eps},
                                  .cross = true,
                                  .names = {.self = "self", .ffn = "ffn"}};
  Value y = transformer_block(g.scope("b"), {.x = x, .memory = memory, .memory_mask = key_padding_mask(len, SeqKV)}, o).x;
  g.loss(sum(y * g.input("probe", {Batch, Seq, D})));
  return g;
};
constexpr auto t5_stack = [] {  // pre-norm RMS, one relative position bias for the stack, gated GELU, no biases
  Builder g;
  Value x = g.input("x", {Batch, Seq, D}, {.grad = true});
  const TransformerBlockOptions o{.attention = {.heads = 2, .bias = false, .scale_scores = false},
                                  .ffn = {.d_ff = 12, .activation = Act::gated_gelu, .bias = false},
                                  .placement = Norm::pre,
                                  .norm = {.kind = NormKind::rms}};
  Value bias = relative_bias(g.scope("relative_bias"), 2, Seq, Seq, {.buckets = 8, .max_distance = 16});
  for (int l = 0; l < 2; ++l) x = transformer_block(g.scope("block", l), {.x = x, .bias = bias}, o).x;
  g.loss(sum(x * g.input("probe", {Batch, Seq, D})));
  return g;
};
constexpr auto llama_block = [] {  // RMSNorm, 4 query heads over 2 key/value heads, RoPE, QK-norm, a window, SwiGLU, no biases
  Builder g;
  Value x = g.input("x", {Batch, Seq, D}, {.grad = true});
  const TransformerBlockOptions o{.attention = {.heads = 4, .causal = true, .bias = false, .kv_heads = 2, .rope = RopeOptions{},
                                                .qk_norm = true, .window = 3, .softcap = 5.0},
                                  .ffn = {.d_ff = 12, .activation = Act::swiglu, .bias = false},
                                  .placement = Norm::pre,
                                  .norm = {.kind = NormKind::rms}};
  Value y = transformer_block(g.scope("b"), {.x = x}, o).x;
  g.loss(sum(y * g.input("probe", {Batch, Seq, D})));
  return g;
};
static constexpr auto LLAMA = freeze<llama_block>();
static constexpr auto GPT = freeze<gpt_block>();
static constexpr auto PAPER = freeze<paper_block>();
static constexpr auto T5 = freeze<t5_stack>();

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
  require_gradcheck<LLAMA>();
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
  CHECK(names(gpt) == std::vector<std::string>{"b.ln_1.weight", "b.ln_1.bias", "b.attn.qkv.weight", "b.attn.qkv.bias",
                                               "b.attn.wo.weight", "b.attn.wo.bias", "b.ln_2.weight", "b.ln_2.bias",
                                               "b.mlp.fc1.weight", "b.mlp.fc1.bias", "b.mlp.fc2.weight", "b.mlp.fc2.bias"});
  // One bias table for the whole stack, as T5 shares it.
  CHECK(names(t5) == std::vector<std::string>{"relative_bias.weight",
                                              "block.0.ln_1.weight", "block.0.attn.wq.weight", "block.0.attn.wk.weight",
                                              "block.0.attn.wv.weight", "block.0.attn.wo.weight", "block.0.ln_2.weight",
                                              "block.0.mlp.wi_0.weight", "block.0.mlp.wi_1.weight", "block.0.mlp.wo.weight",
                                              "block.1.ln_1.weight", "block.1.attn.wq.weight", "block.1.attn.wk.weight",
                                              "block.1.attn.wv.weight", "block.1.attn.wo.weight", "block.1.ln_2.weight",
                                              "block.1.mlp.wi_0.weight", "block.1.mlp.wi_1.weight", "block.1.mlp.wo.weight"});
  Program<LLAMA> llama;
  CHECK(names(llama) == std::vector<std::string>{"b.ln_1.weight", "b.attn.wq.weight", "b.attn.wk.weight", "b.attn.wv.weight",
                                                 "b.attn.q_norm.weight", "b.attn.k_norm.weight", "b.attn.wo.weight", "b.ln_2.weight",
                                                 "b.mlp.wi_0.weight", "b.mlp.wi_1.weight", "b.mlp.wo.weight"});
  CHECK(llama.parameter("b.attn.wk.weight").value.numel == D / 2 * D);  // 2 of 4 heads' width
  CHECK(llama.parameter("b.attn.q_norm.weight").value.numel == D / 4);  // over d_head
  // self (4 projections x 2) + ln_1 (2) + cross (8) + ln_2 (2) + ffn (4) + ln_3 (2)
  CHECK(paper.parameters().size() == 8 + 2 + 8 + 2 + 4 + 2);
  CHECK(paper.parameter("b.cross.wq.weight").value.numel == D * D);
  CHECK(paper.parameter("b.ln_3.bias").value.numel == D);
}

constexpr auto with_weights = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, D});
  Value len = g.input("len", {Batch}, {.dtype = DType::index});
  const AttentionResult a = multi_head_attention(g.scope("attn"), {.q = x, .mask = key_padding_mask(len, Seq), .weights = true},
                                                 {.heads = 2, .causal = true});
  g.output(a.out, "out");
  g.output(*a.weights, "weights");
  g.output(embedding(g.scope("emb"), len, 10, 4, {.scale_by_sqrt_d = true}), "emb");
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

// Runtime hyperparameters: one graph, dropout and eps changed without a rebuild, checked by the ops.
constexpr auto hyper_block = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, D});
  const Real p = g.hyper("dropout", 0.0), eps = g.hyper("norm_eps", 1e-5);
  const TransformerBlockOptions o{.attention = {.heads = 2, .dropout = p}, .ffn = {.d_ff = 16}, .norm = {.eps = eps}, .dropout = p};
  g.output(transformer_block(g.scope("b"), {.x = x}, o).x, "y");
  return g;
};
static constexpr auto HYPER = freeze<hyper_block>();

TEST_CASE("hyperparameters change between steps without a rebuild and are checked by the ops using them", "[models][layers][hyper]") {
  Program<HYPER> p({.seed = 1});
  REQUIRE(p.hypers().size() == 2);
  CHECK(p.hyper("dropout") == 0.0);
  fill_random_inputs(p, {.seed = 4, .sym = {2, 5, 5, 1, 1, 1}});
  p.forward();
  const auto y0 = p.output("y");
  const std::vector<float> plain(y0.data, y0.data + y0.numel);
  p.set_hyper("dropout", 0.5);
  p.forward();
  const auto y1 = p.output("y");
  CHECK(std::vector<float>(y1.data, y1.data + y1.numel) != plain);  // dropout now active
  p.forward(Mode::infer);
  const auto y2 = p.output("y");
  CHECK(std::vector<float>(y2.data, y2.data + y2.numel) == plain);  // inference: no dropout
  // The ops refuse what their shape rules refuse, name themselves, and keep the old value.
  CHECK_THROWS_WITH(p.set_hyper("dropout", 1.5), Catch::Matchers::Contains("hyperparameter 'dropout' = 1.5: op") &&
                                                     Catch::Matchers::Contains("must be in [0, 1)"));
  CHECK(p.hyper("dropout") == 0.5);
  CHECK_THROWS_WITH(p.set_hyper("norm_eps", -1), Catch::Matchers::Contains("op layer_norm") && Catch::Matchers::Contains("eps must be >= 0"));
  CHECK_THROWS_WITH(p.set_hyper("dropuot", 0.1), Catch::Matchers::Contains("did you mean 'dropout'?"));
  // Set at construction, before the parameters are initialised.
  Program<HYPER> q({.seed = 1, .hypers = {{"dropout", 0.25}}});
  CHECK(q.hyper("dropout") == 0.25);
}
