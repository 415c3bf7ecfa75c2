// BERT: parameter set and initialisation, a whole-model gradcheck of both graphs (padding and
// picked positions included), the key padding mask, the encoder shared by name between the MLM
// and the classifier, and a tiny model that learns.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/bert.hpp>
#include <ctgrad/optim/optimizers.hpp>

using namespace ctgrad;
using namespace ctgrad::models;

namespace {
constexpr BertConfig kMicro{.vocab = 13, .n_layer = 2, .heads = 2, .d_model = 8, .d_ff = 12, .context = 8};
constexpr auto kMicroMlm = freeze<bert_mlm, kMicro>();
constexpr auto kMicroCls = freeze<bert_classifier, kMicro, 3>();
constexpr BertConfig kMicroPre{.vocab = 13, .n_layer = 1, .heads = 2, .d_model = 8, .d_ff = 12, .context = 8, .pre_norm = true};
constexpr auto kMicroPreMlm = freeze<bert_mlm, kMicroPre>();
constexpr auto kTinyMlm = freeze<bert_mlm, kBertTiny>();
constexpr auto kMicroNsp = freeze<bert_mlm, with_next_sentence(kMicro)>();

double stddev(std::span<const float> v) {
  double m = 0, s = 0;
  for (float x : v) m += x;
  m /= double(v.size());
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size()));
}

// Batch 2 x Seq 6: the second row padded after 4 tokens; picks 3 positions (one of them in row 2).
const RandomInputs kInputs{.seed = 7,
                           .sym = {2, 6, 1, 3, 1, 1},
                           .index_range = 13,
                           .index_ranges = {{"segments", 0, 2}, {"lengths", 4, 7}, {"picks", 0, 12}, {"labels", 0, 3}}};
}  // namespace

TEST_CASE("BERT: parameter set, truncated-normal initialisation", "[models][bert]") {
  Program<kTinyMlm> p(Options{.seed = 3});
  constexpr std::int64_t d = kBertTiny.d_model, V = kBertTiny.vocab, L = kBertTiny.n_layer, T = kBertTiny.context, F = kBertTiny.d_ff;
  std::int64_t n = 0;
  for (const auto& q : p.parameters()) n += q.value.numel;
  // tok, pos, seg, embedding norm; per layer: q, k, v, o (with biases), 2 norms, 2 FFN linears;
  // the MLM head: dense, norm, output bias (the projection is the token table).
  CHECK(n == V * d + T * d + 2 * d + 2 * d + L * (4 * (d * d + d) + 4 * d + (d * F + F) + (F * d + d)) + (d * d + d) + 2 * d + V);
  const auto tok = p.parameter("tok.weight").value.span();
  CHECK(stddev(tok) == Approx(0.02 * 0.88).epsilon(0.08));  // a N(0, 1) truncated at 2 sd has sd 0.88
  float largest = 0;
  for (float x : tok) largest = std::max(largest, std::abs(x));
  CHECK(largest <= 0.04f);
  CHECK(stddev(p.parameter("layer.1.ffn.fc1.weight").value.span()) == Approx(0.02 * 0.88).epsilon(0.08));
  for (float b : p.parameter("mlm.bias").value.span()) CHECK(b == 0.0f);
  for (float w : p.parameter("layer.0.ln_2.weight").value.span()) CHECK(w == 1.0f);
}

TEST_CASE("BERT: whole-model gradcheck in double precision (MLM, MLM + next sentence, pre-norm MLM, classifier)", "[models][bert]") {
  auto with_dropout = [&](auto& p) {  // the same graphs: dropout is a hyperparameter
    p.set_hyper("dropout", 0.1);
    fill_random_inputs(p, kInputs);
  };
  {
    auto r = gradcheck<kMicroMlm>(kInputs);
    INFO(r.worst << "\n" << r.report);
    CHECK(r.ok);
    auto rd = gradcheck<kMicroMlm>(with_dropout);
    INFO(rd.worst << "\n" << rd.report);
    CHECK(rd.ok);
  }
  {  // with next-sentence prediction: labels are is-next flags
    RandomInputs pairs = kInputs;
    pairs.index_ranges.back() = {"labels", 0, 2};
    auto r = gradcheck<kMicroNsp>(pairs);
    INFO(r.worst << "\n" << r.report);
    CHECK(r.ok);
  }
  {
    auto r = gradcheck<kMicroPreMlm>(kInputs);
    INFO(r.worst << "\n" << r.report);
    CHECK(r.ok);
  }
  {
    auto r = gradcheck<kMicroCls>(with_dropout);
    INFO(r.worst << "\n" << r.report);
    CHECK(r.ok);
  }
}

TEST_CASE("BERT: padding is invisible (the tokens after a row's length change nothing before it)", "[models][bert]") {
  Program<kMicroCls> p(Options{.seed = 4});
  p.set_hyper("dropout", 0);
  std::vector<std::int32_t> ids{5, 1, 2, 3, 0, 0}, seg(6, 0), len{4}, labels{1};
  std::vector<float> pool{1, 0, 0, 0, 0, 0};  // the <cls> vector
  auto run = [&] {
    p.set_input(bert_inputs::pool, std::span<const float>(pool), {1, 6});
    p.set_input(bert_inputs::ids, std::span<const std::int32_t>(ids), {1, 6});
    p.set_input(bert_inputs::segments, std::span<const std::int32_t>(seg), {1, 6});
    p.set_input(bert_inputs::lengths, std::span<const std::int32_t>(len), {1});
    p.set_input(bert_inputs::labels, std::span<const std::int32_t>(labels), {1});
    p.forward(Mode::infer);
    const auto o = p.output("logits");
    return std::vector<float>(o.span().begin(), o.span().end());
  };
  const auto a = run();
  ids[4] = 9, ids[5] = 12, seg[5] = 1;  // other padding
  const auto b = run();
  CHECK(a == b);
  ids[3] = 7;  // a real token: the <cls> vector changes
  CHECK(run() != a);
}

TEST_CASE("BERT: the classifier loads the MLM model's encoder by name, its head starts new", "[models][bert]") {
  Program<kMicroMlm> mlm(Options{.seed = 1});
  Program<kMicroCls> cls(Options{.seed = 2});
  const int copied = copy_matching_weights(mlm.parameters(), cls);
  int encoder = 0;
  for (const auto& q : cls.parameters()) {
    const std::string name(q.name);
    const bool head = name.rfind("pooler.", 0) == 0 || name.rfind("cls.", 0) == 0;
    encoder += !head;
    if (!head) CHECK(std::equal(q.value.span().begin(), q.value.span().end(), mlm.parameter(name).value.span().begin()));
  }
  CHECK(copied == encoder);
}

TEST_CASE("BERT: a tiny model learns to fill masks from the rest of the row", "[models][bert]") {
  constexpr std::int64_t B = 8, S = 8, P = 16;
  Program<kMicroMlm> p(Options{.threads = 1, .seed = 9});
  p.set_hyper("dropout", 0);
  optim::AdamW<float> opt(p.parameters(), {.lr = 3e-3});
  std::vector<std::int32_t> ids(B * S), seg(B * S, 0), len(B, S), picks(P), targets(P);
  constexpr int kSteps = 600, kTail = 100;
  double first = 0, tail = 0;
  for (int step = 0; step < kSteps; ++step) {
    // Each row repeats one token (1..12); 2 of its positions are masked with id 0: the answer is
    // anywhere else in the row, so the loss can only fall through attention.
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < S; ++t)
        ids[std::size_t(b * S + t)] = std::int32_t(1 + random::bits(random::key(std::uint64_t(step), 4, 2), std::uint64_t(b)) % 12);
    for (std::int64_t k = 0; k < P; ++k) {
      const std::int64_t b = k / 2, t = 1 + std::int64_t(random::bits(random::key(std::uint64_t(step), 3, 1), std::uint64_t(k)) % (S - 1));
      picks[std::size_t(k)] = std::int32_t(b * S + t);
      targets[std::size_t(k)] = ids[std::size_t(b * S + t)];
    }
    for (std::int64_t k = 0; k < P; ++k) ids[std::size_t(picks[std::size_t(k)])] = 0;
    p.set_input(bert_inputs::ids, std::span<const std::int32_t>(ids), {B, S});
    p.set_input(bert_inputs::segments, std::span<const std::int32_t>(seg), {B, S});
    p.set_input(bert_inputs::lengths, std::span<const std::int32_t>(len), {B});
    p.set_input(bert_inputs::picks, std::span<const std::int32_t>(picks), {P});
    p.set_input(bert_inputs::targets, std::span<const std::int32_t>(targets), {P});
    p.zero_grad();
    p.forward();
    p.backward();
    p.execute([&] { opt.step(); });
    if (step == 0) first = p.loss();
    if (step >= kSteps - kTail) tail += p.loss() / kTail;
  }
  // lr 3e-3, not 1e-2: at 1e-2 the path is chaotic, and the SSE2/AVX2/AVX-512 kernels' roundings
  // sent it to different plateaus (the AVX2 run sat near 1.2 at step 550). At 3e-3 all three agree
  // to 5 digits, and PyTorch's reference follows the same curve (about 0.2 at step 550).
  INFO("first " << first << " mean of the last " << kTail << " steps " << tail);
  CHECK(first > 2.0);  // about ln 13
  CHECK(tail < 0.6);
}
