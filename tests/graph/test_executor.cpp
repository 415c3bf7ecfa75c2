// The executor: runtime shape errors, inference mode, rebinding, determinism across threads.
#include <catch2/catch.hpp>

#include "../host.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "../models.hpp"

using namespace ctgrad;
using Catch::Matchers::Contains;

static constexpr auto G = freeze<ctgrad::testing::mlp_classifier<8, 32, 4, 2>>();
static constexpr auto ATTN = freeze<ctgrad::testing::attention_model<8>>();

namespace {
std::vector<float> ramp(std::size_t n, float scale = 0.1f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * float(int(i * 7919 % 23) - 11);
  return v;
}
std::vector<std::int32_t> labels(std::size_t n, int classes) {
  std::vector<std::int32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::int32_t(i * 31 % std::size_t(classes));
  return v;
}
}  // namespace

TEST_CASE("runtime shape errors name the input, the op and both shapes", "[executor][errors]") {
  Program<ATTN> p;
  auto x = ramp(2 * 5 * 8);
  auto mask = ramp(2 * 1 * 6);
  auto t = ramp(2 * 5 * 8);
  p.set_input("x", std::span<const float>(x), {2, 5, 8});
  p.set_input("target", std::span<const float>(t), {2, 5, 8});

  // Static dim wrong: caught when the input is set.
  auto bad = ramp(2 * 5 * 7);
  CHECK_THROWS_WITH(p.set_input("x", std::span<const float>(bad), {2, 5, 7}),
                    Contains("input 'x'") && Contains("[2,5,7]") && Contains("[Batch,Seq,8]") &&
                        Contains("used by op linear"));
  // Rank wrong.
  CHECK_THROWS_AS(p.set_input("x", std::span<const float>(x), {10, 8}), shape_error);
  // Data size does not match the shape.
  CHECK_THROWS_WITH(p.set_input("x", std::span<const float>(x), {2, 4, 8}), Contains("needs 64 elements, data has 80"));
  // Two inputs disagree on Seq: caught at forward, naming both inputs and shapes.
  p.set_input("mask", std::span<const float>(mask), {2, 1, 6});
  CHECK_THROWS_WITH(p.forward(), Contains("input 'mask'") && Contains("[2,1,6]") && Contains("Seq=6") &&
                                     Contains("input 'x' [2,5,8]") && Contains("Seq=5"));
  // Wrong dtype and unknown names.
  auto ids = labels(10, 3);
  CHECK_THROWS_WITH(p.set_input("mask", std::span<const std::int32_t>(ids), {2, 1, 5}), Contains("expects real values"));
  CHECK_THROWS_WITH(p.set_input("nope", std::span<const float>(x), {2, 5, 8}), Contains("no input named 'nope'"));
  // Fixed: runs.
  auto mask_ok = ramp(2 * 1 * 5);
  p.set_input("mask", std::span<const float>(mask_ok), {2, 1, 5});
  REQUIRE_NOTHROW(p.forward());
}

TEST_CASE("an input never set is reported", "[executor][errors]") {
  Program<G> p;
  auto x = ramp(3 * 8);
  p.set_input("x", std::span<const float>(x), {3, 8});
  CHECK_THROWS_WITH(p.forward(), Contains("input 'y'") && Contains("never set"));
}

TEST_CASE("a bad class id is a clear error, not a crash", "[executor][errors]") {
  Program<G> p;
  auto x = ramp(3 * 8);
  std::vector<std::int32_t> y = {0, 9, 1};
  p.set_input("x", std::span<const float>(x), {3, 8});
  p.set_input("y", std::span<const std::int32_t>(y), {3});
  CHECK_THROWS_WITH(p.forward(), Contains("op cross_entropy") && Contains("target 9 at row 1") && Contains("[0, 4)"));
}

TEST_CASE("inference mode keeps no activations and gives the training-mode outputs", "[executor]") {
  Program<G> p(Options{.seed = 2});
  auto x = ramp(64 * 8);
  auto y = labels(64, 4);
  p.set_input("x", std::span<const float>(x), {64, 8});
  p.set_input("y", std::span<const std::int32_t>(y), {64});
  p.forward(Mode::train);
  std::vector<float> train_out(p.output("logits").span().begin(), p.output("logits").span().end());
  float train_loss = p.loss();
  p.forward(Mode::infer);
  auto out = p.output("logits");
  REQUIRE(out.numel == 64 * 4);
  CHECK(std::equal(train_out.begin(), train_out.end(), out.data));
  CHECK(p.loss() == train_loss);
  CHECK(p.plan_bytes(Mode::infer) < p.plan_bytes(Mode::train));
  CHECK_THROWS_WITH(p.backward(), Contains("needs a forward(Mode::train)"));
}

TEST_CASE("inference memory does not grow with depth, training memory does", "[executor][plan]") {
  static constexpr auto DEEP = freeze<ctgrad::testing::mlp_classifier<8, 32, 4, 8>>();
  auto run = [](auto& p) {
    auto x = ramp(64 * 8);
    auto y = labels(64, 4);
    p.set_input("x", std::span<const float>(x), {64, 8});
    p.set_input("y", std::span<const std::int32_t>(y), {64});
    p.forward(Mode::infer);
  };
  Program<G> shallow;
  Program<DEEP> deep;
  run(shallow);
  run(deep);
  CHECK(deep.plan_bytes(Mode::infer) == shallow.plan_bytes(Mode::infer));
  // Training keeps at least each extra hidden layer's output [64, 32] for its backward pass.
  CHECK(deep.plan_bytes(Mode::train) >= shallow.plan_bytes(Mode::train) + 6 * 64 * 32 * sizeof(float));

}

TEST_CASE("a new batch size rebinds the runtime dims", "[executor]") {
  Program<G> p;
  for (std::int64_t batch : {4, 16, 3}) {
    auto x = ramp(std::size_t(batch) * 8);
    auto y = labels(std::size_t(batch), 4);
    p.set_input("x", std::span<const float>(x), {batch, 8});
    p.set_input("y", std::span<const std::int32_t>(y), {batch});
    p.forward();
    p.backward();
    CHECK(p.symbol(Batch) == batch);
    CHECK(p.output("logits").size(0) == batch);
  }
}

namespace {
// Trains a few SGD steps and returns every parameter bit and every loss.
std::vector<float> train_mlp(int threads) {
  static constexpr auto W = freeze<ctgrad::testing::mlp_classifier<64, 256, 10, 3>>();
  Program<W> p(Options{.threads = threads, .seed = 9});
  REQUIRE(p.threads() == threads);
  auto x = ramp(256 * 64, 0.05f);
  auto y = labels(256, 10);
  p.set_input("x", std::span<const float>(x), {256, 64});
  p.set_input("y", std::span<const std::int32_t>(y), {256});
  std::vector<float> trace;
  for (int step = 0; step < 5; ++step) {
    p.zero_grad();
    p.forward();
    p.backward();
    auto v = p.parameter_values();
    auto g = p.parameter_grads();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] -= 0.05f * g[i];
    trace.push_back(p.loss());
  }
  auto v = p.parameter_values();
  trace.insert(trace.end(), v.begin(), v.end());
  return trace;
}
}  // namespace

TEST_CASE("same seed gives bitwise-identical training with 1 and 2 threads", "[executor][determinism]") {
  if (!ctgrad::testing::two_cpus()) return;
  auto one = train_mlp(1), two = train_mlp(2);
  REQUIRE(one.size() == two.size());
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  CHECK(one[4] < one[0]);  // and it learns
}

TEST_CASE("one training step in bf16 precision stays within bf16's rounding of fp32", "[executor][bf16]") {
  if (!ctgrad::testing::bf16_gemm()) return;
  static constexpr auto W = freeze<ctgrad::testing::mlp_classifier<64, 256, 10, 3>>();
  auto step = [](kernel::Precision precision) {
    ctgrad::testing::ScopedPrecision scope(precision);
    Program<W> p(Options{.threads = 1, .seed = 9});
    auto x = ramp(256 * 64, 0.05f);
    auto y = labels(256, 10);
    p.set_input("x", std::span<const float>(x), {256, 64});
    p.set_input("y", std::span<const std::int32_t>(y), {256});
    p.zero_grad();
    p.forward();
    p.backward();
    const auto g = p.parameter_grads();
    std::vector<float> out(g.begin(), g.end());
    out.push_back(p.loss());
    return out;
  };
  const auto fp32 = step(kernel::Precision::fp32), bf16 = step(kernel::Precision::bf16);
  REQUIRE(fp32.size() == bf16.size());
  const float loss32 = fp32.back(), loss16 = bf16.back();
  CHECK(std::abs(loss16 - loss32) <= 1e-2f * std::abs(loss32));
  double diff = 0, norm = 0;  // the gradients' relative difference
  for (std::size_t i = 0; i + 1 < fp32.size(); ++i) diff += double(fp32[i] - bf16[i]) * (fp32[i] - bf16[i]), norm += double(fp32[i]) * fp32[i];
  INFO("loss fp32 " << loss32 << " bf16 " << loss16 << ", gradient relative difference " << std::sqrt(diff / norm));
  CHECK(std::sqrt(diff / norm) < 3e-2);
  CHECK(diff > 0);  // bf16 did run
}

TEST_CASE("changing an input between forward and backward is refused", "[executor][errors]") {
  Program<G> p;
  auto x = ramp(2 * 8), x_big = ramp(64 * 8);
  auto y = labels(2, 4), y_big = labels(64, 4);
  p.set_input("x", std::span<const float>(x), {2, 8});
  p.set_input("y", std::span<const std::int32_t>(y), {2});
  p.forward();
  // A bigger batch moves the input's store: backward must not read the old activations.
  p.set_input("x", std::span<const float>(x_big), {64, 8});
  CHECK_THROWS_WITH(p.backward(), Contains("needs a forward(Mode::train) first"));
  // A forward that fails leaves no stale forward behind either.
  std::vector<std::int32_t> bad(64, 7);
  p.set_input("y", std::span<const std::int32_t>(bad), {64});
  CHECK_THROWS(p.forward());
  CHECK_THROWS_WITH(p.backward(), Contains("needs a forward(Mode::train) first"));
  p.set_input("y", std::span<const std::int32_t>(y_big), {64});
  p.forward();
  REQUIRE_NOTHROW(p.backward());
}

constexpr auto no_trainable = [] {
  Builder g;
  Value x = g.input("x", {Batch, 3});
  Value t = g.input("t", {Batch, 3});
  g.output(g.input("ids", {Batch}, {.dtype = DType::index}), "ids");
  g.loss(mse(x, t));
  return g;
};
static constexpr auto NO_TRAINABLE = freeze<no_trainable>();

TEST_CASE("backward with nothing to differentiate is a clear error", "[executor][errors]") {
  Program<NO_TRAINABLE> p;
  auto x = ramp(6);
  std::vector<std::int32_t> ids = {1, 2};
  p.set_input("x", std::span<const float>(x), {2, 3});
  p.set_input("t", std::span<const float>(x), {2, 3});
  p.set_input("ids", std::span<const std::int32_t>(ids), {2});
  p.forward();
  CHECK_THROWS_WITH(p.backward(), Contains("nothing to differentiate"));
  CHECK_THROWS_WITH(p.output("ids"), Contains("int32 indices"));
}

// A loss-less graph whose output is a parameter: the seed adds to the parameter's gradient.
constexpr auto param_out = [] {
  Builder g;
  g.output(g.param("w", {2}, init::ones()), "w");
  return g;
};
static constexpr auto PARAM_OUT = freeze<param_out>();

TEST_CASE("a seeded parameter output accumulates like any gradient", "[executor]") {
  Program<PARAM_OUT> p;
  std::vector<float> seed = {13, 14};
  for (int i = 0; i < 2; ++i) {
    p.forward();
    p.set_output_grad("w", seed);
    p.backward();
  }
  CHECK(p.parameter("w").grad[0] == 26.0f);
  CHECK(p.parameter("w").grad[1] == 28.0f);
}

namespace {
std::vector<float> train_attention(int threads) {
  Program<ATTN> p(Options{.threads = threads, .seed = 3});
  auto x = ramp(4 * 33 * 8, 0.05f), t = ramp(4 * 33 * 8, 0.02f);
  std::vector<float> mask(4 * 33, 1.0f);
  for (int k = 20; k < 33; ++k) mask[std::size_t(3 * 33 + k)] = 0;  // sequence 3 is padded
  p.set_input("x", std::span<const float>(x), {4, 33, 8});
  p.set_input("mask", std::span<const float>(mask), {4, 1, 33});
  p.set_input("target", std::span<const float>(t), {4, 33, 8});
  std::vector<float> trace;
  for (int step = 0; step < 3; ++step) {
    p.zero_grad();
    p.forward();
    p.backward();
    auto v = p.parameter_values();
    auto g = p.parameter_grads();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] -= 0.1f * g[i];
    trace.push_back(p.loss());
  }
  auto gx = p.input_grad("x");
  trace.insert(trace.end(), gx.data, gx.data + gx.numel);
  auto v = p.parameter_values();
  trace.insert(trace.end(), v.begin(), v.end());
  return trace;
}
}  // namespace

TEST_CASE("attention training is bitwise identical with 1 and 2 threads", "[executor][determinism]") {
  if (!ctgrad::testing::two_cpus()) return;
  auto one = train_attention(1), two = train_attention(2);
  REQUIRE(one.size() == two.size());
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
}

namespace {
constexpr auto kViews = [] {
  Builder g;
  Value x = g.input("x", {Batch, 6}, {.grad = true});
  Value y = scale(x, 2.0);
  Value r = reshape(y, {Batch, 2, 3});           // a view of an arena value
  Value rr = reshape(r, {Batch, 3, 2});          // a view of a view
  Value rx = reshape(x, {Batch, 3, 2});          // a view of an input
  g.output(y, "y");
  g.output(rr, "rr");
  g.output(rx, "rx");
  g.loss(sum(rr * g.input("probe", {Batch, 3, 2})) + sum(rx * rx));
  return g;
};
static constexpr auto VIEWS = freeze<kViews>();
}  // namespace

TEST_CASE("reshape is a view of its source's storage, also of an input whose store grows", "[executor][plan]") {
  // nodes: x 0, y 1, r 2, rr 3: r and rr (through r) share y's buffer
  STATIC_REQUIRE(Program<VIEWS>::train_plan.view_of[2] == 1);
  STATIC_REQUIRE(Program<VIEWS>::train_plan.view_of[3] == 1);
  Program<VIEWS> p;
  for (std::int64_t batch : {2, 5}) {  // 5 rows outgrow the input's first store
    const auto x = ramp(std::size_t(batch) * 6), probe = ramp(std::size_t(batch) * 6, 0.3f);
    p.set_input("x", std::span<const float>(x), {batch, 6});
    p.set_input("probe", std::span<const float>(probe), {batch, 3, 2});
    p.forward();
    CHECK(p.output("rr").data == p.output("y").data);
    CHECK(p.output("rx").data == p.input_data("x").data);
    for (std::size_t i = 0; i < x.size(); ++i) {
      CHECK(p.output("rr").data[i] == 2 * x[i]);
      CHECK(p.output("rx").data[i] == x[i]);
    }
    p.backward();
    const auto gx = p.input_grad("x");
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(gx.data[i] == Approx(2 * probe[i] + 2 * x[i]));
  }
}

TEST_CASE("the op profile times every op node once per run, and only when asked", "[executor][profile]") {
  auto x = ramp(16 * 8);
  auto y = labels(16, 4);
  auto run = [&](Program<G>& p, int steps) {
    for (int s = 0; s < steps; ++s) {
      p.set_input("x", std::span<const float>(x), {16, 8});
      p.set_input("y", std::span<const std::int32_t>(y), {16});
      p.zero_grad();
      p.forward();
      p.backward();
    }
  };
  Program<G> plain(Options{.threads = 1, .seed = 3});
  run(plain, 1);
  CHECK(!plain.profiling_ops());
  CHECK(plain.op_profile().empty());

  Program<G> p(Options{.threads = 2, .seed = 3, .profile_ops = true});
  run(p, 3);
  const auto times = p.op_profile();
  REQUIRE(!times.empty());
  int linears = 0;
  for (const auto& t : times) {
    INFO(t.node << " (" << t.op << ")");
    CHECK(t.forward_runs == 3);                  // each op node runs once per forward
    CHECK((t.vjp_runs == 3 || t.vjp_runs == 0));  // and once per backward if a gradient flows through it
    CHECK(t.forward_s >= 0);
    CHECK(t.vjp_s >= 0);
    linears += t.op == std::string_view("linear");
  }
  CHECK(linears == 5);  // 2 blocks of 2 linears, and the head
  const std::string table = format_op_profile(times, 3);
  CHECK_THAT(table, Contains("linear") && Contains("cross_entropy") && Contains("total"));
  // The profile does not change the results.
  run(plain, 2);
  CHECK(std::memcmp(plain.parameter_grads().data(), p.parameter_grads().data(), p.parameter_grads().size_bytes()) == 0);
  p.reset_op_profile();
  CHECK(p.op_profile().empty());
}
