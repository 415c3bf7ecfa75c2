// The GPT: parameter names and GPT-2 initialisation, a whole-model gradcheck, incremental decoding
// with the key/value cache against the full forward pass, sampling, and its errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/gpt.hpp>

using namespace ctgrad;
using namespace ctgrad::models;

namespace {
constexpr GptConfig kMicro{.vocab = 11, .n_layer = 2, .n_head = 2, .d_model = 8, .context = 8};
constexpr auto kMicroGraph = freeze<gpt, kMicro>();
constexpr auto kTinyGraph = freeze<gpt, kGptTiny>();

double stddev(std::span<const float> v) {
  double m = 0, s = 0;
  for (float x : v) m += x;
  m /= double(v.size());
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size()));
}
}  // namespace

TEST_CASE("GPT: GPT-2 parameter set and initialisation", "[models][gpt]") {
  Program<kTinyGraph> p(Options{.seed = 3});
  constexpr int d = kGptTiny.d_model, V = kGptTiny.vocab, L = kGptTiny.n_layer, T = kGptTiny.context;
  std::int64_t n = 0;
  for (const auto& q : p.parameters()) n += q.value.numel;
  // wte, wpe, per block: 2 norms, qkv, wo, fc1, fc2 (with biases); ln_f.
  CHECK(n == V * d + T * d + L * (4 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)) + 2 * d);
  CHECK(stddev(p.parameter("wte.weight").value.span()) == Approx(0.02).epsilon(0.05));
  CHECK(stddev(p.parameter("h.0.attn.qkv.weight").value.span()) == Approx(0.02).epsilon(0.05));
  CHECK(stddev(p.parameter("h.1.mlp.fc1.weight").value.span()) == Approx(0.02).epsilon(0.05));
  const double resid = 0.02 / std::sqrt(2.0 * L);
  CHECK(stddev(p.parameter("h.0.attn.wo.weight").value.span()) == Approx(resid).epsilon(0.08));
  CHECK(stddev(p.parameter("h.1.mlp.fc2.weight").value.span()) == Approx(resid).epsilon(0.05));
  for (float b : p.parameter("h.0.mlp.fc1.bias").value.span()) CHECK(b == 0.0f);
  for (float w : p.parameter("ln_f.weight").value.span()) CHECK(w == 1.0f);
}

TEST_CASE("GPT: whole-model gradcheck in double precision, with and without dropout", "[models][gpt]") {
  const RandomInputs in{.seed = 5, .sym = {2, 6, 1, 1, 1, 1}, .index_range = 11};
  auto r = gradcheck<kMicroGraph>(in);
  INFO(r.worst << "\n" << r.report);
  CHECK(r.ok);
  auto rd = gradcheck<kMicroGraph>([&](auto& p) {  // the same graph: dropout is a hyperparameter
    p.set_hyper("dropout", 0.1);
    fill_random_inputs(p, in);
  });
  INFO(rd.worst << "\n" << rd.report);
  CHECK(rd.ok);
}

TEST_CASE("GPT: decoding with the key/value cache gives the full forward pass's logits", "[models][gpt]") {
  constexpr GptConfig C = kGptTiny;
  Program<kTinyGraph> full(Options{.seed = 11});
  // A random sequence of the whole context, run at once through the training graph.
  std::vector<std::int32_t> seq(C.context);
  for (std::size_t i = 0; i < seq.size(); ++i) seq[i] = std::int32_t(random::bits(77, i) % 60);
  full.set_input(models::gpt_inputs::ids, std::span<const std::int32_t>(seq), {1, C.context});
  full.set_input(models::gpt_inputs::targets, std::span<const std::int32_t>(seq), {1, C.context});
  full.forward(Mode::infer);
  const auto want = full.output("logits");
  // Greedy decoding from a 5-token prompt: each step's logits are the full pass's row there,
  // as long as the chosen token is the sequence's (we force that by comparing row by row).
  Program<GptGenerator<C>::graph> dec;
  for (const auto& p : dec.parameters()) std::copy_n(full.parameter(p.name).value.data, p.value.numel, p.value.data);
  std::vector<std::vector<float>> cache(2 * C.n_layer);
  constexpr std::int64_t H = C.n_head, dh = C.d_model / C.n_head;
  double worst = 0;
  std::int64_t past = 0;
  // Steps of a prompt (5 tokens), single tokens and chunks, until the context is full.
  for (std::int64_t T : {5, 1, 1, 3, 1, 4, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}) {
    {
      const std::int64_t L = past + T;
      std::vector<std::int32_t> pos(static_cast<std::size_t>(T));
      for (std::int64_t i = 0; i < T; ++i) pos[std::size_t(i)] = std::int32_t(past + i);
      dec.set_input(models::gpt_inputs::ids, std::span<const std::int32_t>(seq).subspan(std::size_t(past), std::size_t(T)), {1, T});
      dec.set_input(models::gpt_inputs::positions, std::span<const std::int32_t>(pos), {T});
      for (int c = 0; c < 2 * C.n_layer; ++c) {
        std::vector<float> in(std::size_t(H * L * dh), 1e3f);  // the room is garbage: it must be overwritten
        for (std::int64_t h = 0; h < H; ++h)
          std::copy_n(cache[std::size_t(c)].data() + h * past * dh, past * dh, in.data() + h * L * dh);
        dec.set_input("cache." + std::to_string(c / 2) + (c % 2 ? ".v" : ".k"), std::span<const float>(in), {1, H, L, dh});
      }
      dec.forward(Mode::infer);
      for (int c = 0; c < 2 * C.n_layer; ++c) {
        const auto present = dec.output("present." + std::to_string(c / 2) + (c % 2 ? ".v" : ".k"));
        REQUIRE(present.size(2) == L);
        cache[std::size_t(c)].assign(present.data, present.data + present.numel);
      }
      const auto got = dec.output("logits");
      for (std::int64_t i = 0; i < T * C.vocab; ++i)
        worst = std::max(worst, double(std::abs(got.data[i] - want.data[past * C.vocab + i])));
      past = L;
    }
  }
  CHECK(past == C.context);
  CHECK(worst < 1e-5);
}

TEST_CASE("GPT: the generator samples reproducibly and stops where told", "[models][gpt]") {
  Program<kTinyGraph> model(Options{.seed = 2});
  GptGenerator<kGptTiny> gen(model.parameters());
  auto run = [&](SamplingOptions o, std::vector<std::int32_t> prompt) {
    gen.generate(prompt, 60, o, [](std::int32_t) {});
    return prompt;
  };
  const std::vector<std::int32_t> prompt{1, 2, 3};
  const auto a = run(SamplingOptions{.seed = 4, .max_tokens = 20}, prompt), b = run(SamplingOptions{.seed = 4, .max_tokens = 20}, prompt);
  CHECK(a == b);
  CHECK(a.size() == 23);
  for (std::int32_t t : a) CHECK((t >= 0 && t < 60));
  CHECK(run(SamplingOptions{.seed = 5, .max_tokens = 20}, prompt) != a);
  // At the context limit generation stops (a full window still predicts one more), unless it
  // slides; a shorter trained context is a shorter window.
  CHECK(run(SamplingOptions{.max_tokens = 100}, prompt).size() == std::size_t(kGptTiny.context + 1));
  CHECK(run(SamplingOptions{.max_tokens = 100, .context = 16}, prompt).size() == 17);
  CHECK_THROWS_WITH(run(SamplingOptions{.context = 64}, prompt), Catch::Contains("exceeds the model's 32"));
  CHECK_THROWS_WITH(run(SamplingOptions{.context = 4}, {1, 2, 3, 4, 5}), Catch::Contains("more than the model's context of 4"));
  const auto slid = run(SamplingOptions{.temperature = 0, .max_tokens = 100, .slide = true}, prompt);
  CHECK(slid.size() == 103);
  // After a slide, the cache holds the window's last half: the next token is what the full
  // model gives for that half alone.
  {
    std::vector<std::int32_t> half(slid.begin() + 17, slid.begin() + 33);
    model.set_input(models::gpt_inputs::ids, std::span<const std::int32_t>(half), {1, 16});
    model.set_input(models::gpt_inputs::targets, std::span<const std::int32_t>(half), {1, 16});
    model.forward(Mode::infer);
    const auto l = model.output("logits");
    CHECK(std::max_element(l.data + 15 * 256, l.data + 15 * 256 + 60) - (l.data + 15 * 256) == slid[33]);
  }
  // The end token ends it.
  const auto greedy = run(SamplingOptions{.temperature = 0, .max_tokens = 10}, prompt);
  const auto ended = run(SamplingOptions{.temperature = 0, .max_tokens = 10, .end_token = greedy[5]}, prompt);
  CHECK(ended.size() == std::size_t(std::find(greedy.begin() + 3, greedy.end(), greedy[5]) - greedy.begin() + 1));
  CHECK(ended.back() == greedy[5]);
  // Greedy = top-k 1 = a tiny nucleus, whatever the seed.
  CHECK(run(SamplingOptions{.top_k = 1, .seed = 9, .max_tokens = 10}, prompt) == greedy);
  CHECK(run(SamplingOptions{.top_p = 1e-6, .seed = 8, .max_tokens = 10}, prompt) == greedy);
  // Bad input.
  CHECK_THROWS_WITH(run(SamplingOptions{}, std::vector<std::int32_t>(33, 1)), Catch::Contains("more than the model's context of 32"));
  CHECK_THROWS_WITH(run(SamplingOptions{}, {1, 70}), Catch::Contains("prompt token 70 at position 1 is outside the vocabulary"));
  CHECK_THROWS_WITH(run(SamplingOptions{.top_p = 0}, prompt), Catch::Contains("top-p"));
  CHECK_THROWS_WITH(run(SamplingOptions{}, {}), Catch::Contains("empty"));
}

TEST_CASE("sampling: temperature, top-k and top-p draw from the distribution they describe", "[models][gpt]") {
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f), 100.0f};
  std::vector<std::pair<double, std::int32_t>> work;
  auto freq = [&](SamplingOptions o) {
    std::vector<double> f(4, 0);
    const int n = 40000;
    for (int i = 0; i < n; ++i) f[std::size_t(sample_token(logits, 4, o, std::uint64_t(i), work))] += 1.0 / n;  // id 4 is padding
    return f;
  };
  const auto plain = freq(SamplingOptions{});
  CHECK(plain[0] == Approx(0.5).margin(0.01));
  CHECK(plain[3] == Approx(0.05).margin(0.01));
  const auto k2 = freq(SamplingOptions{.top_k = 2});
  CHECK(k2[0] == Approx(0.625).margin(0.01));
  CHECK(k2[2] == 0);
  const auto p = freq(SamplingOptions{.top_p = 0.9});  // 0.5 + 0.3 + 0.15 reaches 0.9
  CHECK(p[2] == Approx(0.15 / 0.95).margin(0.01));
  CHECK(p[3] == 0);
  const auto cold = freq(SamplingOptions{.temperature = 0.5});  // p^2, renormalised
  CHECK(cold[0] == Approx(0.25 / (0.25 + 0.09 + 0.0225 + 0.0025)).margin(0.01));
  CHECK(sample_token(logits, 4, SamplingOptions{.temperature = 0}, 0, work) == 0);
  // A tiny temperature is greedy, not an overflow; a non-finite logit is an error.
  CHECK(sample_token(std::vector<float>{30, 50, 40}, 3, SamplingOptions{.temperature = 1e-307}, 0, work) == 1);
  CHECK_THROWS_WITH(sample_token(std::vector<float>{0, NAN, 1}, 3, SamplingOptions{}, 0, work), Catch::Contains("logit of token 1"));
}
