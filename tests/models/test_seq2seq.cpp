// The Bahdanau RNN encoder-decoder (models/seq2seq.hpp): a gradcheck in double through both
// scans and the attention; the decoding graphs give the training graph's logits step by step;
// the attention layer's additive scores and Nadaraya-Watson pooling against plain loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/recurrent_translator.hpp>
#include <ctgrad/models/seq2seq.hpp>

using namespace ctgrad;

namespace {
constexpr models::Seq2SeqConfig kGrad{.vocab = 7, .embed = 3, .hidden = 4, .layers = 2};
static constexpr auto GradG = freeze<models::seq2seq, kGrad>();
static constexpr auto Train = freeze<models::seq2seq, models::kSeq2SeqTiny>();
static constexpr auto Encoder = freeze<models::seq2seq_encoder, models::kSeq2SeqTiny>();
static constexpr auto Step = freeze<models::seq2seq_step, models::kSeq2SeqTiny>();

namespace in = models::seq2seq_inputs;

struct Pairs {
  std::int64_t B, S, T;
  std::vector<std::int32_t> src, src_len, tgt_in, tgt_len, tgt_out;
};
Pairs pairs(std::int64_t B, std::int64_t S, std::int64_t T, int vocab, std::uint64_t seed) {
  Pairs p{B, S, T, {}, {}, {}, {}, {}};
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t sl = S - b % 3, tl = T - (b + 1) % 2;
    p.src_len.push_back(std::int32_t(sl));
    p.tgt_len.push_back(std::int32_t(tl));
    for (std::int64_t s = 0; s < S; ++s) p.src.push_back(s < sl ? std::int32_t(1 + random::bits(random::key(seed, 1, 0), std::uint64_t(b * S + s)) % (vocab - 1)) : 0);
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int32_t y = std::int32_t(1 + random::bits(random::key(seed, 2, 0), std::uint64_t(b * T + t)) % (vocab - 1));
      p.tgt_in.push_back(t < tl ? (t == 0 ? 2 : y) : 0);
      p.tgt_out.push_back(t < tl ? y : 0);
    }
  }
  return p;
}
template <class P>
void feed(P& m, const Pairs& p) {
  m.set_input(in::src, std::span<const std::int32_t>(p.src), {p.B, p.S});
  m.set_input(in::src_len, std::span<const std::int32_t>(p.src_len), {p.B});
  m.set_input(in::tgt_in, std::span<const std::int32_t>(p.tgt_in), {p.B, p.T});
  m.set_input(in::tgt_len, std::span<const std::int32_t>(p.tgt_len), {p.B});
  m.set_input(in::tgt_out, std::span<const std::int32_t>(p.tgt_out), {p.B, p.T});
}
}  // namespace

TEST_CASE("seq2seq: gradcheck in double through the encoder's and the decoder's scans", "[models][seq2seq]") {
  for (auto [S, T] : {std::pair<std::int64_t, std::int64_t>{4, 3}, {6, 5}}) {
    const Pairs p = pairs(3, S, T, kGrad.vocab, std::uint64_t(S));
    GradcheckResult r = gradcheck<GradG>([&](auto& m) { feed(m, p); }, {.max_per_tensor = 12, .poison_assigned_gradients = true});
    INFO("S " << S << " T " << T << ": worst " << r.worst << "\n" << r.report);
    CHECK(r.checked > 0);
    CHECK(r.ok);
  }
}

TEST_CASE("seq2seq: the decoding graphs give the training graph's logits, step by step", "[models][seq2seq]") {
  constexpr auto C = models::kSeq2SeqTiny;
  Program<Train> train({.threads = 2, .seed = 3});
  const Pairs p = pairs(3, 7, 6, C.vocab, 9);
  feed(train, p);
  train.forward(Mode::infer);
  const auto logits = train.output("logits");     // [B, T, V]
  const auto attention = train.output("attention");  // [B, T, S]
  Program<Encoder> enc({.threads = 2});
  Program<Step> step({.threads = 2});
  models::copy_weights(train.parameters(), enc, "test");
  models::copy_weights(train.parameters(), step, "test");
  enc.set_input(in::src, std::span<const std::int32_t>(p.src), {p.B, p.S});
  enc.set_input(in::src_len, std::span<const std::int32_t>(p.src_len), {p.B});
  enc.forward(Mode::infer);
  auto copy = [](auto t) { return std::vector<float>(t.data, t.data + t.numel); };
  const std::vector<float> memory = copy(enc.output("memory")), keys = copy(enc.output("keys"));
  std::vector<std::vector<float>> state;
  for (int l = 0; l < C.layers; ++l) state.push_back(copy(enc.output("state." + std::to_string(l))));
  double worst = 0, worst_w = 0;
  for (std::int64_t t = 0; t < p.T; ++t) {
    std::vector<std::int32_t> ids;
    for (std::int64_t b = 0; b < p.B; ++b) ids.push_back(p.tgt_in[std::size_t(b * p.T + t)]);
    step.set_input(in::ids, std::span<const std::int32_t>(ids), {p.B});
    step.set_input(in::src_len, std::span<const std::int32_t>(p.src_len), {p.B});
    step.set_input(in::memory, std::span<const float>(memory), {p.B, p.S, C.hidden});
    step.set_input(in::keys, std::span<const float>(keys), {p.B, p.S, C.hidden});
    for (int l = 0; l < C.layers; ++l) step.set_input("state." + std::to_string(l), std::span<const float>(state[std::size_t(l)]), {p.B, C.hidden});
    step.forward(Mode::infer);
    const auto lg = step.output("logits"), w = step.output("weights");
    for (std::int64_t b = 0; b < p.B; ++b) {
      if (t >= p.tgt_len[std::size_t(b)]) continue;  // the training graph's padded steps are zeros
      for (int v = 0; v < C.vocab; ++v)
        worst = std::max(worst, double(std::abs(lg.data[b * C.vocab + v] - logits.data[(b * p.T + t) * C.vocab + v])));
      for (std::int64_t s = 0; s < p.S; ++s)
        worst_w = std::max(worst_w, double(std::abs(w.data[b * p.S + s] - attention.data[(b * p.T + t) * p.S + s])));
    }
    for (int l = 0; l < C.layers; ++l) state[std::size_t(l)] = copy(step.output("next." + std::to_string(l)));
  }
  CHECK(worst < 1e-5);
  CHECK(worst_w < 1e-6);
  // Padded source positions get no attention.
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t s = p.src_len[std::size_t(b)]; s < p.S; ++s) CHECK(attention.data[b * p.T * p.S + s] == 0.0f);
}

namespace {
constexpr auto additive_model = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 8});
  Value mask = g.input("mask", {Batch, 1, 1, Seq}, {.dtype = DType::index});
  const auto r = layers::multi_head_attention(g.scope("attn"), {.q = x, .mask = mask, .weights = true},
                                              {.heads = 2, .score = layers::AttentionScore::additive});
  g.output(*r.weights, "weights");
  g.loss(sum(r.out * g.input("probe", {Batch, Seq, 8})));
  return g;
};
static constexpr auto Additive = freeze<additive_model>();
constexpr auto nw_model = [] {
  Builder g;
  Value q = g.input("q", {Batch, Seq}, {.grad = true});
  Value k = g.input("k", {Batch, SeqKV}, {.grad = true});
  Value v = g.input("v", {Batch, SeqKV}, {.grad = true});
  const auto r = layers::nadaraya_watson(g.scope("nw"), q, k, v);
  g.output(r.weights, "weights");
  g.loss(sum(r.out * g.input("probe", {Batch, Seq})));
  return g;
};
static constexpr auto NW = freeze<nw_model>();
}  // namespace

TEST_CASE("attention: additive scores (w_v^T tanh(q + k)) with masks, and Nadaraya-Watson pooling", "[models][attention]") {
  for (std::int64_t T : {1, 5}) {
    RandomInputs ri{.seed = 3, .sym = {2, T, 4, 1, 1, 1}, .index_range = 2};
    GradcheckResult r = gradcheck<Additive>(ri, {.max_per_tensor = 16});
    INFO("additive, T " << T << ": " << r.worst << "\n" << r.report);
    CHECK(r.ok);
    GradcheckResult n = gradcheck<NW>(ri, {.max_per_tensor = 16});
    INFO("Nadaraya-Watson: " << n.worst << "\n" << n.report);
    CHECK(n.ok);
  }
  // The weights against plain loops: softmax_j(-((q_i - k_j) w)^2 / 2).
  Program<NW, double> p({.seed = 4});
  const std::vector<double> q{0.5, -1.0}, k{0.0, 1.0, 2.0}, v{1.0, 2.0, 3.0}, probe{1.0, 1.0};
  p.set_input("q", std::span<const double>(q), {1, 2});
  p.set_input("k", std::span<const double>(k), {1, 3});
  p.set_input("v", std::span<const double>(v), {1, 3});
  p.set_input("probe", std::span<const double>(probe), {1, 2});
  p.forward(Mode::infer);
  const double w = p.parameter("nw.w").value.data[0];
  const auto weights = p.output("weights");
  for (int i = 0; i < 2; ++i) {
    double z = 0, e[3];
    for (int j = 0; j < 3; ++j) z += e[j] = std::exp(-0.5 * std::pow((q[std::size_t(i)] - k[std::size_t(j)]) * w, 2));
    for (int j = 0; j < 3; ++j) CHECK(weights.data[i * 3 + j] == Approx(e[j] / z).epsilon(1e-12));
  }
}

TEST_CASE("seq2seq: greedy search picks the training graph's argmax at every step, and batched searches are each sentence's own", "[models][seq2seq]") {
  constexpr auto C = models::kSeq2SeqTiny;
  Program<Train> train({.threads = 2, .seed = 8});
  // Weights of some scale: a few random steps of plain gradient descent on random pairs.
  optim::SGD<float> sgd(train.parameters(), {.lr = 0.5});
  for (std::uint64_t s = 0; s < 20; ++s) {
    feed(train, pairs(4, 6, 5, C.vocab, 100 + s));
    train.zero_grad();
    train.forward();
    train.backward();
    sgd.step();
  }
  models::RecurrentSearch search(std::make_unique<Program<Encoder>>(Options{.threads = 2}), std::make_unique<Program<Step>>(Options{.threads = 2}),
                                 {C.layers, C.hidden, C.vocab}, train.parameters());
  const Pairs p = pairs(3, 6, 2, C.vocab, 77);
  std::vector<std::vector<std::int32_t>> srcs;
  for (std::int64_t b = 0; b < p.B; ++b)
    srcs.push_back({p.src.begin() + b * p.S, p.src.begin() + b * p.S + p.src_len[std::size_t(b)]});
  const auto batched = search.search_batch(srcs, 2, 3, {.beam = 3, .max_len = 8});
  for (std::size_t b = 0; b < srcs.size(); ++b) {
    CHECK(search.search(srcs[b], 2, 3, {.beam = 3, .max_len = 8}) == batched[b]);
    // Greedy: each token is the argmax of the training graph's logits given the tokens before it.
    const std::vector<std::int32_t> out = search.greedy(srcs[b], 2, 3, 8);
    std::vector<std::int32_t> tgt_in{2};
    tgt_in.insert(tgt_in.end(), out.begin(), out.end());
    const std::int64_t T = std::int64_t(tgt_in.size());
    const std::int32_t sl = std::int32_t(srcs[b].size()), tl = std::int32_t(T);
    std::vector<std::int32_t> tgt_out(tgt_in.begin() + 1, tgt_in.end());
    tgt_out.push_back(3);
    train.set_input(in::src, std::span<const std::int32_t>(srcs[b]), {1, sl});
    train.set_input(in::src_len, std::span<const std::int32_t>(&sl, 1), {1});
    train.set_input(in::tgt_in, std::span<const std::int32_t>(tgt_in), {1, T});
    train.set_input(in::tgt_len, std::span<const std::int32_t>(&tl, 1), {1});
    train.set_input(in::tgt_out, std::span<const std::int32_t>(tgt_out), {1, T});
    train.forward(Mode::infer);
    const auto logits = train.output("logits");
    for (std::int64_t t = 0; t < T; ++t) {
      const float* row = logits.data + t * C.vocab;
      const std::int32_t best = std::int32_t(std::max_element(row, row + C.vocab) - row);
      INFO("sentence " << b << " step " << t);
      if (t + 1 < T || std::int64_t(out.size()) < 8) CHECK(best == (t + 1 < T ? tgt_in[std::size_t(t + 1)] : 3));
    }
  }
}
