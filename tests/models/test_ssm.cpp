// The selective state-space layer (models/layers/ssm.hpp) and the GPT with it as each block's
// mixer: a gradcheck in double, masks, the decoding graph's carried state against the training
// graph, and the parameter budget against attention.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/gpt.hpp>

using namespace ctgrad;

namespace {
constexpr auto ssm_model = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 8}, {.grad = true});
  Value mask = g.input("mask", {Batch, Seq}, {.dtype = DType::index});
  const layers::SsmResult r = layers::selective_ssm(g.scope("ssm"), x, {.state = 3, .expand = 2, .init = init::normal(0.3)}, {.mask = mask});
  g.loss(sum(r.out * g.input("probe", {Batch, Seq, 8})) + sum(r.state * g.input("probe_state", {Batch, 16, 3})));
  return g;
};
static constexpr auto Ssm = freeze<ssm_model>();

constexpr models::GptConfig kTinySsm = [] {
  models::GptConfig c = models::kGptTiny;
  c.mixer = layers::Mixer::ssm;
  return c;
}();
static constexpr auto Train = freeze<models::gpt, kTinySsm>();
static constexpr auto Decoder = freeze<models::gpt_decoder, kTinySsm>();
static constexpr auto Attention = freeze<models::gpt, models::kGptSmall>();
static constexpr auto SmallSsm = freeze<models::gpt, [] {
  models::GptConfig c = models::kGptSmall;
  c.mixer = layers::Mixer::ssm;
  return c;
}()>();
}  // namespace

TEST_CASE("ssm: the selective state-space layer's gradcheck in double, masked, over several lengths", "[models][ssm]") {
  for (std::int64_t T : {1, 3, 7}) {
    RandomInputs in{.seed = 5 + std::uint64_t(T), .sym = {2, T, 1, 1, 1, 1}, .index_range = 2};
    GradcheckResult r = gradcheck<Ssm>(in, {.max_per_tensor = 16});
    INFO("T " << T << ": " << r.worst << "\n" << r.report);
    CHECK(r.checked > 0);
    CHECK(r.ok);
  }
}

TEST_CASE("ssm: a GPT of state-space mixers decodes token by token with its carried state as the training graph reads it whole", "[models][ssm]") {
  Program<Train> train({.threads = 2, .seed = 4});
  const std::int64_t T = 9;
  std::vector<std::int32_t> ids(T), targets(T, 0);
  for (std::int64_t t = 0; t < T; ++t) ids[std::size_t(t)] = std::int32_t(random::bits(random::key(3, "ids"), std::uint64_t(t)) % 256);
  train.set_input("ids", std::span<const std::int32_t>(ids), {1, T});
  train.set_input("targets", std::span<const std::int32_t>(targets), {1, T});
  train.forward(Mode::infer);
  const auto logits = train.output("logits");
  // The sampler's way: the prompt's first 4 tokens in one step, then one at a time.
  models::GptSampler sampler(std::make_unique<Program<Decoder>>(Options{.threads = 2}), kTinySsm, train.parameters());
  Program<Decoder> dec({.threads = 2});
  models::copy_weights(train.parameters(), dec, "test");
  const int E = layers::ssm_width_for(kTinySsm.d_model, kTinySsm.ssm_state), N = kTinySsm.ssm_state;
  std::vector<std::vector<float>> state(std::size_t(kTinySsm.n_layer), std::vector<float>(std::size_t(E * N), 0.0f));
  double worst = 0;
  for (std::int64_t past = 0; past < T;) {
    const std::int64_t step = past == 0 ? 4 : 1;
    std::vector<std::int32_t> pos;
    for (std::int64_t t = 0; t < step; ++t) pos.push_back(std::int32_t(past + t));
    dec.set_input("ids", std::span<const std::int32_t>(ids).subspan(std::size_t(past), std::size_t(step)), {1, step});
    dec.set_input("positions", std::span<const std::int32_t>(pos), {step});
    for (int l = 0; l < kTinySsm.n_layer; ++l) dec.set_input("state." + std::to_string(l), std::span<const float>(state[std::size_t(l)]), {1, E, N});
    dec.forward(Mode::infer);
    const auto lg = dec.output("logits");
    for (std::int64_t i = 0; i < lg.numel; ++i) worst = std::max(worst, double(std::abs(lg.data[i] - logits.data[past * 256 + i])));
    for (int l = 0; l < kTinySsm.n_layer; ++l) {
      const auto n = dec.output("next." + std::to_string(l));
      state[std::size_t(l)].assign(n.data, n.data + n.numel);
    }
    past += step;
  }
  CHECK(worst < 1e-5);
  // And the sampler runs on it (states, no caches).
  std::vector<std::int32_t> tokens{65, 66};
  sampler.generate(tokens, 256, {.temperature = 1.0, .max_tokens = 5}, [](std::int32_t) {});
  CHECK(tokens.size() == 7);
}

TEST_CASE("ssm: the state-space GPT has about the attention GPT's parameters", "[models][ssm]") {
  Program<Attention> a;
  Program<SmallSsm> s;
  const double ratio = double(s.parameter_count()) / double(a.parameter_count());
  INFO("attention " << a.parameter_count() << ", ssm " << s.parameter_count());
  CHECK(std::abs(ratio - 1.0) < 0.01);
}
