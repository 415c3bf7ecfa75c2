// The run-time freeze gives the compile-time freeze's graph and plans: the decoder-only families,
// every preset, training and decoding graphs (tests/graph/same_frozen_graph.hpp).
#include "same_frozen_graph.hpp"

#include <ctgrad/models/gpt.hpp>
#include <ctgrad/models/llama.hpp>

using namespace ctgrad;
using ctgrad::testing::require_same_frozen_graph;

namespace {
template <models::GptConfig C>
struct Gpt {
  static constexpr auto train = freeze<models::gpt, C>();
  static constexpr auto decoder = freeze<models::gpt_decoder, C>();
  static void check(const char* name) {
    require_same_frozen_graph<train, models::gpt, C>(name);
    require_same_frozen_graph<decoder, models::gpt_decoder, C>(name);
  }
};
template <models::LlamaConfig C>
struct Llama {
  static constexpr auto train = freeze<models::llama, C>();
  static constexpr auto decoder = freeze<models::llama_decoder, C>();
  static void check(const char* name) {
    require_same_frozen_graph<train, models::llama, C>(name);
    require_same_frozen_graph<decoder, models::llama_decoder, C>(name);
  }
};
constexpr models::LlamaConfig kLlamaSmallMoe = [] {
  models::LlamaConfig c = models::kLlamaSmall;
  c.moe_experts = 4;
  return c;
}();
// Architecture variants beside the presets: every block kind the keys choose.
constexpr models::GptConfig gpt_arch(layers::Norm n, layers::NormKind k, layers::Act a, layers::Pos p, bool tie) {
  models::GptConfig c = models::kGptSmall;
  c.arch = {.norm = n, .norm_kind = k, .act = a, .pos = p, .tie = tie};
  return c;
}
constexpr models::GptConfig kGptPostRmsSwigluRope = gpt_arch(layers::Norm::post, layers::NormKind::rms, layers::Act::swiglu, layers::Pos::rope, false);
constexpr models::GptConfig kGptReluSinusoids = gpt_arch(layers::Norm::pre, layers::NormKind::layer, layers::Act::relu, layers::Pos::sinusoidal, true);
constexpr models::GptConfig kGptGqaQkNorm = [] {
  models::GptConfig c = gpt_arch(layers::Norm::pre, layers::NormKind::rms, layers::Act::gelu, layers::Pos::none, true);
  c.kv_heads = 2, c.qk_norm = true, c.bias = false;
  return c;
}();
constexpr models::LlamaConfig kLlamaEveryKey = [] {
  models::LlamaConfig c = models::kLlamaSmall;
  c.qk_norm = true, c.window = 16, c.bias = true, c.tie = true, c.rope_interleaved = true, c.moe_experts = 4, c.moe_top_k = 1;
  return c;
}();
constexpr models::GptConfig kGptSmallSsm = [] {
  models::GptConfig c = models::kGptSmall;
  c.mixer = layers::Mixer::ssm;
  return c;
}();
}  // namespace

TEST_CASE("run-time freeze: GPT presets (training and decoding graphs) equal the compile-time ones", "[graph][run_time]") {
  Gpt<models::kGptTiny>::check("gpt tiny");
  Gpt<models::kGptSmall>::check("gpt small");
  Gpt<models::kGptMedium>::check("gpt medium");
  Gpt<kGptSmallSsm>::check("gpt small, mixer=ssm (a scan)");
  Gpt<kGptPostRmsSwigluRope>::check("gpt: post-norm, RMSNorm, SwiGLU, RoPE, untied");
  Gpt<kGptReluSinusoids>::check("gpt: ReLU, sinusoids");
  Gpt<kGptGqaQkNorm>::check("gpt: 2 kv heads, QK-norm, no biases, no positions");
}

TEST_CASE("run-time freeze: Llama presets, dense and a mixture of experts, equal the compile-time ones", "[graph][run_time]") {
  Llama<models::kLlamaTiny>::check("llama tiny");
  Llama<models::kLlamaSmall>::check("llama small");
  Llama<models::kLlamaMedium>::check("llama medium");
  Llama<kLlamaSmallMoe>::check("llama small, 4 experts");
  Llama<kLlamaEveryKey>::check("llama: QK-norm, window, biases, tied, interleaved RoPE, 4 experts top-1");
}

TEST_CASE("run-time freeze: a GPT trains to the same bits frozen either way, dropout on", "[graph][run_time]") {
  constexpr auto C = models::kGptSmall;
  Program<Gpt<C>::train> fixed({.threads = 2, .seed = 5});
  Program<run_time> built(freeze(models::gpt(C)), {.threads = 2, .seed = 5});
  fixed.set_hyper("dropout", 0.1), built.set_hyper("dropout", 0.1);
  ctgrad::testing::require_same_bits(fixed, built, [](auto& m, int step) {
    constexpr std::int64_t T = models::kGptSmall.context;
    std::vector<std::int32_t> ids(4 * T), next(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int32_t((i * 7 + std::size_t(step) * 13) % 256), next[i] = std::int32_t((i * 5 + 3) % 256);
    m.set_input(models::gpt_inputs::ids, std::span<const std::int32_t>(ids), {4, T});
    m.set_input(models::gpt_inputs::targets, std::span<const std::int32_t>(next), {4, T});
  });
}

namespace {
// A model with an error after which the compile-time freeze went on building on a broken value:
// 3 heads do not divide width 64, then a norm reads the attention's output.
constexpr auto three_heads_at_64 = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 64});
  Value y = layers::multi_head_attention(g.scope("attn"), {.q = x}, {.heads = 3}).out;
  g.output(layers::norm(g.scope("norm"), y, {.kind = layers::NormKind::rms}), "out");
  return g;
};
constexpr Msg three_heads_error = [] {
  Builder g = three_heads_at_64();
  return g.error;
}();
}  // namespace

TEST_CASE("run-time freeze: a shape error is a graph_error with the compile-time message, the first one", "[graph][run_time]") {
  const std::string want(three_heads_error.view());
  CHECK(want.find("not a multiple of 3") != std::string::npos);
  CHECK(want.find("test_same_frozen_lm.cpp:") != std::string::npos);
  try {
    (void)freeze(three_heads_at_64());
    FAIL("no graph_error");
  } catch (const graph_error& e) {
    CHECK(std::string(e.what()) == want);
  }
}
