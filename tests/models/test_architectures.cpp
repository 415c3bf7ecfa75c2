// Each architecture choice of the GPT, the Transformer and the ViT checked in the model: a double
// precision gradcheck of the training graph, and the decoding graphs (key/value caches, positions
// given per step) against the training graph's logits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/gpt.hpp>
#include <ctgrad/models/transformer.hpp>
#include <ctgrad/models/vit.hpp>

using namespace ctgrad;
using namespace ctgrad::models;
using layers::Act;
using layers::Norm;
using layers::NormKind;
using layers::Pos;

namespace {

constexpr GptConfig kGptMicro{.vocab = 11, .n_layer = 2, .n_head = 2, .d_model = 8, .context = 8};
constexpr GptConfig gpt_with(Norm n, NormKind k, Act a, Pos p, bool tie, int heads = 2) {
  GptConfig c = kGptMicro;
  c.arch = {.norm = n, .norm_kind = k, .act = a, .pos = p, .tie = tie};
  c.n_head = heads;
  return c;
}
// Every choice at least once, each with others changed too.
constexpr GptConfig kGptPostRmsRelu = gpt_with(Norm::post, NormKind::rms, Act::relu, Pos::sinusoidal, true);
constexpr GptConfig kGptSwigluNoPosUntied = gpt_with(Norm::pre, NormKind::layer, Act::swiglu, Pos::none, false, 1);
constexpr GptConfig kGptGeluLearnedFourHeads = gpt_with(Norm::pre, NormKind::rms, Act::gelu, Pos::learned, false, 4);
// The Llama's changes as GPT keys: rotary positions, multi-query attention, QK-norm, no biases.
constexpr GptConfig kGptRopeMqaQkNormNoBias = [] {
  GptConfig c = gpt_with(Norm::pre, NormKind::layer, Act::gelu_tanh, Pos::rope, true, 2);
  c.kv_heads = 1;
  c.qk_norm = true;
  c.bias = false;
  return c;
}();

template <GptConfig C>
void gpt_gradcheck() {
  static constexpr auto G = freeze<gpt, C>();
  auto r = gradcheck<G>([](auto& p) {
    p.set_hyper("dropout", 0.1);
    fill_random_inputs(p, RandomInputs{.seed = 5, .sym = {2, 6, 1, 1, 1, 1}, .index_range = C.vocab});
  });
  INFO(r.worst << "\n" << r.report);
  CHECK(r.ok);
}

// The decoder graph, fed the sequence in pieces over its caches, against the training graph.
template <GptConfig C>
double gpt_decoding_error() {
  static constexpr auto G = freeze<gpt, C>();
  Program<G> full(Options{.seed = 11});
  for (auto& p : full.parameters())  // no parameter at its initial constant: every path matters
    for (std::int64_t i = 0; i < p.value.numel; ++i) p.value.data[i] += 0.05f * float(int(random::bits(p.value.numel, std::uint64_t(i)) % 7) - 3);
  std::vector<std::int32_t> seq(C.context);
  for (std::size_t i = 0; i < seq.size(); ++i) seq[i] = std::int32_t(random::bits(77, i) % std::uint64_t(C.vocab));
  full.set_input(gpt_inputs::ids, std::span<const std::int32_t>(seq), {1, C.context});
  full.set_input(gpt_inputs::targets, std::span<const std::int32_t>(seq), {1, C.context});
  full.forward(Mode::infer);
  const auto want = full.output("logits");
  static constexpr auto D = freeze<gpt_decoder, C>();
  Program<D> dec;
  copy_weights(full.parameters(), dec, "test");
  KvCacheSet cache(C.n_layer, C.kv_heads ? C.kv_heads : C.n_head, C.d_model / C.n_head);
  double worst = 0;
  std::int64_t past = 0;
  for (std::int64_t T : {3, 1, 2, 1, 1}) {
    std::vector<std::int32_t> pos;
    for (std::int64_t i = 0; i < T; ++i) pos.push_back(std::int32_t(past + i));
    dec.set_input(gpt_inputs::ids, std::span<const std::int32_t>(seq).subspan(std::size_t(past), std::size_t(T)), {1, T});
    if (C.arch.pos != Pos::none) dec.set_input(gpt_inputs::positions, std::span<const std::int32_t>(pos), {T});
    cache.feed(dec, 1, T);
    dec.forward(Mode::infer);
    cache.collect(dec);
    const auto got = dec.output("logits");
    for (std::int64_t i = 0; i < T * C.vocab; ++i) worst = std::max(worst, double(std::abs(got.data[i] - want.data[past * C.vocab + i])));
    past += T;
  }
  return worst;
}

}  // namespace

TEST_CASE("Architectures: the GPT's architecture choices, gradchecked in double precision", "[models][architectures]") {
  gpt_gradcheck<kGptPostRmsRelu>();
  gpt_gradcheck<kGptSwigluNoPosUntied>();
  gpt_gradcheck<kGptGeluLearnedFourHeads>();
  gpt_gradcheck<kGptRopeMqaQkNormNoBias>();
}

TEST_CASE("Architectures: the GPT's parameters follow its choices", "[models][architectures]") {
  static constexpr auto A = freeze<gpt, kGptPostRmsRelu>();
  static constexpr auto B = freeze<gpt, kGptSwigluNoPosUntied>();
  Program<A> a;
  Program<B> b;
  auto has = [](const auto& p, std::string_view n) {
    for (const auto& q : p.parameters())
      if (q.name == n) return true;
    return false;
  };
  CHECK_FALSE(has(a, "ln_f.weight"));     // post-norm: the blocks end normalised
  CHECK_FALSE(has(a, "h.0.ln_1.bias"));   // RMSNorm has no bias
  CHECK_FALSE(has(a, "wpe.weight"));      // sinusoidal positions have no parameters
  CHECK(has(a, "h.0.mlp.fc1.weight"));
  CHECK(has(b, "ln_f.weight"));
  CHECK(has(b, "lm_head.weight"));        // untied
  CHECK(has(b, "h.1.mlp.wi_0.weight"));   // SwiGLU, 2/3 of 4d wide (rounded up to 8)
  CHECK(b.parameter("h.1.mlp.wi_0.weight").value.size(0) == layers::gated_width(4 * kGptMicro.d_model));
  static constexpr auto M = freeze<gpt, kGptRopeMqaQkNormNoBias>();
  Program<M> m;
  CHECK_FALSE(has(m, "wpe.weight"));             // rotary positions: none added to the embeddings
  CHECK_FALSE(has(m, "h.0.attn.qkv.weight"));    // kv_heads < heads: separate projections
  CHECK(m.parameter("h.0.attn.wk.weight").value.size(0) == kGptMicro.d_model / 2);  // one key/value head
  CHECK(has(m, "h.0.attn.q_norm.weight"));
  CHECK_FALSE(has(m, "h.0.attn.wq.bias"));
}

TEST_CASE("Architectures: the GPT's decoder with caches gives the training graph's logits in every variant", "[models][architectures]") {
  CHECK(gpt_decoding_error<kGptPostRmsRelu>() < 1e-5);
  CHECK(gpt_decoding_error<kGptSwigluNoPosUntied>() < 1e-5);
  CHECK(gpt_decoding_error<kGptGeluLearnedFourHeads>() < 1e-5);
  CHECK(gpt_decoding_error<kGptRopeMqaQkNormNoBias>() < 1e-5);
}

namespace {

constexpr TransformerConfig kTrMicro{.vocab = 9, .n_layer = 2, .d_model = 8, .heads = 2, .d_ff = 12, .max_positions = 16};
constexpr TransformerConfig tr_with(Norm n, NormKind k, Act a, Pos p, bool tie, int heads = 2) {
  TransformerConfig c = kTrMicro;
  c.arch = {.norm = n, .norm_kind = k, .act = a, .pos = p, .tie = tie};
  c.heads = heads;
  return c;
}
constexpr TransformerConfig kTrPreRmsLearned = tr_with(Norm::pre, NormKind::rms, Act::gelu, Pos::learned, true);
constexpr TransformerConfig kTrSwigluNoPosUntied = tr_with(Norm::post, NormKind::layer, Act::swiglu, Pos::none, false, 1);

template <TransformerConfig C>
void tr_gradcheck() {
  static constexpr auto G = freeze<transformer, C>();
  auto r = gradcheck<G>([](auto& p) {
    fill_random_inputs(p, RandomInputs{.seed = 3, .sym = {2, 5, 6, 1, 1, 1}, .index_range = C.vocab});
    const std::vector<std::int32_t> src_len{6, 4}, tgt_len{5, 3};
    p.set_input(transformer_inputs::src_len, std::span<const std::int32_t>(src_len), {2});
    p.set_input(transformer_inputs::tgt_len, std::span<const std::int32_t>(tgt_len), {2});
  });
  INFO(r.worst << "\n" << r.report);
  CHECK(r.ok);
}

// Encoder + step graphs over caches against the training graph, on a padded batch.
template <TransformerConfig C>
double tr_decoding_error() {
  static constexpr auto G = freeze<transformer, C>();
  Program<G> full(Options{.seed = 4, .hypers = {{"dropout", 0}}});
  constexpr std::int64_t B = 2, S = 7, T = 6;
  std::vector<std::int32_t> src, tgt_in, tgt_out, src_len{7, 4}, tgt_len{6, 6};
  for (std::int64_t i = 0; i < B * S; ++i) src.push_back(std::int32_t(1 + random::bits(31, std::uint64_t(i)) % (C.vocab - 1)));
  for (std::int64_t i = 0; i < B * T; ++i) tgt_in.push_back(std::int32_t(1 + random::bits(32, std::uint64_t(i)) % (C.vocab - 1)));
  tgt_out = tgt_in;
  full.set_input(transformer_inputs::src, std::span<const std::int32_t>(src), {B, S});
  full.set_input(transformer_inputs::src_len, std::span<const std::int32_t>(src_len), {B});
  full.set_input(transformer_inputs::tgt_in, std::span<const std::int32_t>(tgt_in), {B, T});
  full.set_input(transformer_inputs::tgt_len, std::span<const std::int32_t>(tgt_len), {B});
  full.set_input(transformer_inputs::tgt_out, std::span<const std::int32_t>(tgt_out), {B, T});
  full.forward(Mode::infer);
  const auto want = full.output("logits");
  using D = TransformerDecoding<C>;
  Program<D::encoder_graph> enc;
  Program<D::step_graph> step;
  copy_weights(full.parameters(), enc, "test");
  copy_weights(full.parameters(), step, "test");
  enc.set_input(transformer_inputs::src, std::span<const std::int32_t>(src), {B, S});
  enc.set_input(transformer_inputs::src_len, std::span<const std::int32_t>(src_len), {B});
  enc.forward(Mode::infer);
  for (int c = 0; c < 2 * C.n_layer; ++c) {
    const std::string name = "cross." + std::to_string(c / 2) + (c % 2 ? ".v" : ".k");
    const auto t = enc.output(name);
    step.set_input(name, std::span<const float>(t.data, std::size_t(t.numel)), t.shape());
  }
  step.set_input(transformer_inputs::src_len, std::span<const std::int32_t>(src_len), {B});
  KvCacheSet cache(C.n_layer, C.heads, C.d_model / C.heads);
  double worst = 0;
  std::int64_t past = 0;
  for (std::int64_t n : {2, 1, 2, 1}) {
    std::vector<std::int32_t> ids, pos;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = past; t < past + n; ++t) ids.push_back(tgt_in[std::size_t(b * T + t)]);
    for (std::int64_t t = past; t < past + n; ++t) pos.push_back(std::int32_t(t));
    step.set_input(transformer_inputs::ids, std::span<const std::int32_t>(ids), {B, n});
    if (D::step_positions) step.set_input(transformer_inputs::positions, std::span<const std::int32_t>(pos), {n});
    cache.feed(step, B, n);
    step.forward(Mode::infer);
    cache.collect(step);
    const auto got = step.output("logits");
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < n; ++t)
        for (int v = 0; v < C.vocab; ++v)
          worst = std::max(worst, double(std::abs(got.data[(b * n + t) * C.vocab + v] - want.data[(b * T + past + t) * C.vocab + v])));
    past += n;
  }
  return worst;
}

}  // namespace

TEST_CASE("Architectures: the Transformer's architecture choices, gradchecked, and decoding with caches", "[models][architectures]") {
  tr_gradcheck<kTrPreRmsLearned>();
  tr_gradcheck<kTrSwigluNoPosUntied>();
  CHECK(tr_decoding_error<kTrPreRmsLearned>() < 1e-5);
  CHECK(tr_decoding_error<kTrSwigluNoPosUntied>() < 1e-5);
}

TEST_CASE("Architectures: the ViT's architecture choices, gradchecked", "[models][architectures]") {
  static constexpr VitConfig base{.image = 8, .channels = 1, .patch = 4, .d_model = 8, .n_layer = 2, .heads = 2, .d_mlp = 12, .classes = 3};
  static constexpr VitConfig post = [] {
    VitConfig c = base;
    c.arch = {.norm = Norm::post, .norm_kind = NormKind::rms, .act = Act::swiglu, .pos = Pos::sinusoidal};
    return c;
  }();
  static constexpr VitConfig mean_nopos = [] {
    VitConfig c = base;
    c.arch = {.norm = Norm::pre, .act = Act::relu, .pos = Pos::none};
    c.mean_pool = true;
    c.heads = 1;
    return c;
  }();
  static constexpr auto G1 = freeze<vit, post>();
  static constexpr auto G2 = freeze<vit, mean_nopos>();
  const RandomInputs in{.seed = 7, .sym = {3, 1, 1, 1, 1, 1}, .index_range = 3};
  auto r1 = gradcheck<G1>(in);
  INFO(r1.worst << "\n" << r1.report);
  CHECK(r1.ok);
  auto r2 = gradcheck<G2>(in);
  INFO(r2.worst << "\n" << r2.report);
  CHECK(r2.ok);
}
