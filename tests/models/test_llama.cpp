// The Llama: Hugging Face's parameter names and shapes, a whole-model gradcheck, and incremental
// decoding over a grouped key/value cache (RoPE at the cached positions, a sliding window) against
// the full forward pass; the same for a mixture of experts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/llama.hpp>

using namespace ctgrad;
using namespace ctgrad::models;

namespace {
constexpr LlamaConfig kMicro{.vocab = 11, .n_layer = 2, .n_head = 4, .kv_heads = 2, .d_model = 8, .context = 8, .d_ff = 12,
                             .qk_norm = true, .window = 3};
constexpr auto kMicroGraph = freeze<llama, kMicro>();
// 4 query heads over 2 key/value heads, a window of 7 over a context of 32.
constexpr LlamaConfig kSmallTest{.vocab = 64, .n_layer = 2, .n_head = 4, .kv_heads = 2, .d_model = 32, .context = 32, .d_ff = 48, .window = 7};
// A mixture of 4 experts, top-2, at a capacity that drops choices (12 tokens: 5 rows per expert
// for 24 choices); and one at twice the tokens' choices (nothing dropped: decoding agrees).
constexpr LlamaConfig kMicroMoe{.vocab = 11, .n_layer = 2, .n_head = 4, .kv_heads = 2, .d_model = 8, .context = 8, .d_ff = 6,
                                .moe_experts = 4, .moe_top_k = 2, .moe_capacity = 0.75};
constexpr auto kMicroMoeGraph = freeze<llama, kMicroMoe>();
constexpr LlamaConfig kSmallMoe{.vocab = 64, .n_layer = 2, .n_head = 4, .kv_heads = 2, .d_model = 32, .context = 32, .d_ff = 24,
                                .moe_experts = 4, .moe_top_k = 2, .moe_capacity = 2};
}  // namespace

TEST_CASE("Llama: Hugging Face's parameter names, grouped key/value projections", "[models][llama]") {
  Program<kMicroGraph> p(Options{.seed = 3});
  std::vector<std::string> names;
  for (const auto& q : p.parameters()) names.emplace_back(q.name);
  const std::vector<std::string> layer0{"model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
                                        "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                                        "model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight",
                                        "model.layers.0.self_attn.o_proj.weight", "model.layers.0.post_attention_layernorm.weight",
                                        "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                                        "model.layers.0.mlp.down_proj.weight"};
  REQUIRE(names.size() == 1 + 2 * layer0.size() + 2);
  CHECK(names.front() == "model.embed_tokens.weight");
  CHECK(std::equal(layer0.begin(), layer0.end(), names.begin() + 1));
  CHECK(names[names.size() - 2] == "model.norm.weight");
  CHECK(names.back() == "lm_head.weight");
  const auto shape = [&](const char* n) {
    const auto s = p.parameter(n).value.shape();
    return std::vector<std::int64_t>(s.begin(), s.end());
  };
  CHECK(shape("model.layers.1.self_attn.q_proj.weight") == std::vector<std::int64_t>{8, 8});
  CHECK(shape("model.layers.1.self_attn.k_proj.weight") == std::vector<std::int64_t>{4, 8});  // 2 of 4 heads of 2
  CHECK(shape("model.layers.1.mlp.gate_proj.weight") == std::vector<std::int64_t>{12, 8});
  CHECK(shape("lm_head.weight") == std::vector<std::int64_t>{11, 8});
}

TEST_CASE("Llama: whole-model gradcheck in double precision", "[models][llama]") {
  auto r = gradcheck<kMicroGraph>(RandomInputs{.seed = 5, .sym = {2, 6, 1, 1, 1, 1}, .index_range = 11});
  INFO(r.worst << "\n" << r.report);
  CHECK(r.checked > 100);
  CHECK(r.ok);
}

TEST_CASE("Llama: a mixture of experts in every layer, its names, gradcheck and auxiliary terms", "[models][llama][moe]") {
  Program<kMicroMoeGraph> p(Options{.seed = 3});
  const auto shape = [&](const char* n) {
    const auto s = p.parameter(n).value.shape();
    return std::vector<std::int64_t>(s.begin(), s.end());
  };
  CHECK(shape("model.layers.0.mlp.gate.weight") == std::vector<std::int64_t>{4, 8});                  // the router
  CHECK(shape("model.layers.1.mlp.experts.gate_proj") == std::vector<std::int64_t>{4, 6, 8});         // [E, f, d]
  CHECK(shape("model.layers.1.mlp.experts.down_proj") == std::vector<std::int64_t>{4, 8, 6});         // [E, d, f]
  auto r = gradcheck<kMicroMoeGraph>(RandomInputs{.seed = 5, .sym = {2, 6, 1, 1, 1, 1}, .index_range = 11});
  INFO(r.worst << "\n" << r.report);
  CHECK(r.checked > 100);
  CHECK(r.ok);
  std::vector<std::int32_t> ids(12), targets(12);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int32_t(i % 11), targets[i] = std::int32_t((i * 3 + 1) % 11);
  p.set_input(llama_inputs::ids, std::span<const std::int32_t>(ids), {2, 6});
  p.set_input(llama_inputs::targets, std::span<const std::int32_t>(targets), {2, 6});
  p.forward(Mode::infer);
  const double ce = p.output("ce")[0], balance = p.output("moe.balance")[0], z = p.output("moe.z")[0], dropped = p.output("moe.dropped")[0];
  CHECK(p.loss() == Approx(ce + 0.01 * balance + 0.001 * z).epsilon(1e-6));  // the default weights
  CHECK((balance > 0 && balance <= 4.0 + 1e-6));  // E sum f P: 1 when uniform, at most E
  CHECK(dropped >= 4.0 / 24 - 1e-6);  // 24 choices, 20 rows: at least 4 dropped in each layer
  CHECK(dropped < 1.0);
}

namespace {

// The decoder of C, fed the sequence in pieces over its caches, against the training graph: the
// largest logit difference; and a greedy sampler run twice over it.
template <LlamaConfig C>
double decoding_error() {
  static constexpr auto G = freeze<llama, C>();
  Program<G> full(Options{.seed = 11});
  std::vector<std::int32_t> seq(C.context);
  for (std::size_t i = 0; i < seq.size(); ++i) seq[i] = std::int32_t(random::bits(77, i) % 60);
  full.set_input(llama_inputs::ids, std::span<const std::int32_t>(seq), {1, C.context});
  full.set_input(llama_inputs::targets, std::span<const std::int32_t>(seq), {1, C.context});
  full.forward(Mode::infer);
  const auto want = full.output("logits");
  Program<LlamaGenerator<C>::graph> dec;
  for (const auto& p : dec.parameters()) std::copy_n(full.parameter(p.name).value.data, p.value.numel, p.value.data);
  std::vector<std::vector<float>> cache(2 * C.n_layer);
  constexpr std::int64_t H = C.kv_heads, dh = C.d_model / C.n_head;  // the cache holds the key/value heads only
  double worst = 0;
  std::int64_t past = 0;
  for (std::int64_t T : {5, 1, 1, 3, 1, 4, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}) {
    const std::int64_t L = past + T;
    std::vector<std::int32_t> pos(static_cast<std::size_t>(T));
    for (std::int64_t i = 0; i < T; ++i) pos[std::size_t(i)] = std::int32_t(past + i);
    dec.set_input(llama_inputs::ids, std::span<const std::int32_t>(seq).subspan(std::size_t(past), std::size_t(T)), {1, T});
    dec.set_input(llama_inputs::positions, std::span<const std::int32_t>(pos), {T});
    for (int c = 0; c < 2 * C.n_layer; ++c) {
      std::vector<float> in(std::size_t(H * L * dh), 1e3f);  // the room is garbage: it must be overwritten
      for (std::int64_t h = 0; h < H; ++h) std::copy_n(cache[std::size_t(c)].data() + h * past * dh, past * dh, in.data() + h * L * dh);
      dec.set_input("cache." + std::to_string(c / 2) + (c % 2 ? ".v" : ".k"), std::span<const float>(in), {1, H, L, dh});
    }
    dec.forward(Mode::infer);
    for (int c = 0; c < 2 * C.n_layer; ++c) {
      const auto present = dec.output("present." + std::to_string(c / 2) + (c % 2 ? ".v" : ".k"));
      REQUIRE(present.size(1) == H);
      REQUIRE(present.size(2) == L);
      cache[std::size_t(c)].assign(present.data, present.data + present.numel);
    }
    const auto got = dec.output("logits");
    for (std::int64_t i = 0; i < T * C.vocab; ++i) worst = std::max(worst, double(std::abs(got.data[i] - want.data[past * C.vocab + i])));
    past = L;
  }
  CHECK(past == C.context);
  // The sampler over the same decoder: greedy decoding is reproducible and stays in the vocabulary.
  LlamaGenerator<C> gen(full.parameters());
  std::vector<std::int32_t> a{1, 2, 3}, b{1, 2, 3};
  gen.generate(a, 60, SamplingOptions{.temperature = 0, .max_tokens = 20}, [](std::int32_t) {});
  gen.generate(b, 60, SamplingOptions{.temperature = 0, .max_tokens = 20}, [](std::int32_t) {});
  CHECK(a == b);
  CHECK(a.size() == 23);
  return worst;
}

}  // namespace

TEST_CASE("Llama: decoding over the grouped key/value cache gives the full forward pass's logits", "[models][llama]") {
  CHECK(decoding_error<kSmallTest>() < 1e-5);
  CHECK(decoding_error<kSmallMoe>() < 1e-5);  // a mixture of experts with room for every choice
}
