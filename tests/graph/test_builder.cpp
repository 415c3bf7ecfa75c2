// The graph as a compile-time value: names, shapes, errors recorded by the builder, the plan.
#include <catch2/catch.hpp>

#include <string>

#include "../models.hpp"

using namespace ctgrad;
using ctgrad::testing::mlp_classifier;

static constexpr auto G1 = freeze<mlp_classifier<8, 16, 4, 1>>();
static constexpr auto G12 = freeze<mlp_classifier<32, 64, 4, 12>>();

TEST_CASE("static shapes are computed at compile time, runtime dims stay symbols", "[graph]") {
  // logits are [Batch, 4]; the loss is a scalar.
  constexpr int logits = [] {
    for (int i = 0; i < G1.size; ++i)
      if (G1[i].is_output && G1.output_name(i) == "logits") return i;
    return -1;
  }();
  STATIC_REQUIRE(logits >= 0);
  STATIC_REQUIRE(G1[logits].shape == Shape{Batch, 4});
  STATIC_REQUIRE(G1[G1.loss].shape.rank == 0);
}

TEST_CASE("parameters have hierarchical names in declaration order", "[graph]") {
  Program<G12> p;
  auto params = p.parameters();
  REQUIRE(params.size() == 12 * 4 + 2);
  CHECK(params[0].name == "block.0.fc1.weight");
  CHECK(params[1].name == "block.0.fc1.bias");
  CHECK(params[3 * 4 + 2].name == "block.3.fc2.weight");
  CHECK(params.back().name == "head.bias");
  CHECK(p.parameter("block.11.fc1.weight").value.shape()[0] == 64);
  CHECK(p.parameter("block.11.fc1.weight").value.shape()[1] == 32);
}

constexpr auto alone_graph = [] {
  Builder g;
  g.loss(sum(g.scope("enc").param("x", {3, 4}, init::normal(1.0))));
  return g;
};
constexpr auto after_others_graph = [] {
  Builder g;
  Value o = g.param("other", {3, 4}, init::normal(1.0));
  g.loss(sum(o + g.scope("enc").param("x", {3, 4}, init::normal(1.0))));
  return g;
};
static constexpr auto ALONE = freeze<alone_graph>();
static constexpr auto AFTER_OTHERS = freeze<after_others_graph>();

TEST_CASE("parameter init is seeded and reproducible", "[graph]") {
  Program<G1> a(Options{.seed = 5}), b(Options{.seed = 5}), c(Options{.seed = 6});
  auto va = a.parameter_values(), vb = b.parameter_values(), vc = c.parameter_values();
  REQUIRE(std::equal(va.begin(), va.end(), vb.begin()));
  CHECK(!std::equal(va.begin(), va.end(), vc.begin()));
  // A parameter's values depend on its name, not on what else the model holds or its position.
  Program<ALONE> alone(Options{.seed = 5});
  Program<AFTER_OTHERS> after(Options{.seed = 5});
  auto x1 = alone.parameter("enc.x").value, x2 = after.parameter("enc.x").value;
  REQUIRE(x1.numel == 12);
  CHECK(std::equal(x1.data, x1.data + 12, x2.data));
  auto other = after.parameter("other").value;
  CHECK(!std::equal(x1.data, x1.data + 12, other.data));  // another name, other values
}

// Errors are recorded while building; freeze<>() turns the first into a compile error (see
// tests/compile_fail). Here the message itself is checked in constant evaluation.
constexpr Msg matmul_mismatch = [] {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 512});
  Value w = g.param("w", {256, 64}, init::zeros());
  matmul(x, w);
  return g.error;
}();
constexpr Msg seq_mixup = [] {
  Builder g;
  Value q = g.input("q", {Batch, Seq, 64});
  Value k = g.input("k", {Batch, SeqKV, 64});
  Value s = g.scope("attn").input("scores_bias", {Batch, Seq, Seq});
  add(matmul(q, k, {.trans_b = true}), s);
  return g.error;
}();
constexpr Msg param_runtime_dim = [] {
  Builder g;
  g.param("w", {Batch, 4}, init::zeros());
  return g.error;
}();
constexpr Msg loss_not_scalar = [] {
  Builder g;
  g.loss(g.input("x", {Batch}));
  return g.error;
}();

// Duplicates are found at freeze time, even when a same-named leaf of another kind sits between.
constexpr Msg duplicate_param = [] {
  Builder g;
  g.param("w", {2}, init::zeros());
  g.input("w", {2});
  g.param("w", {3}, init::zeros());
  g.check_duplicates();
  return g.error;
}();
constexpr Msg duplicate_output = [] {
  Builder g;
  Value x = g.input("x", {2});
  g.output(relu(x), "out");
  g.output(scale(x, 2.0), "out");
  g.check_duplicates();
  return g.error;
}();

constexpr Msg split_symbolic = [] {
  Builder g;
  split<3>(g.input("qkv", {Batch, Seq}), -1);
  return g.error;
}();

TEST_CASE("duplicate parameter and output names are errors", "[graph][errors]") {
  CHECK(std::string(split_symbolic.view()).find("split: dim Seq of [Batch,Seq] is not a static multiple of 3") == 0);
  CHECK(std::string(duplicate_param.view()).find("parameter 'w' is declared twice (test_builder.cpp:") == 0);
  CHECK(std::string(duplicate_output.view()) == "output 'out' is declared twice");
}

TEST_CASE("static shape errors name the op, the dims and the line", "[graph][errors]") {
  std::string m(matmul_mismatch.view());
  INFO(m);
  CHECK(m.find("op matmul") == 0);
  CHECK(m.find("inner dims differ: 512 vs 256") != std::string::npos);
  CHECK(m.find("test_builder.cpp:") != std::string::npos);

  std::string mix(seq_mixup.view());
  INFO(mix);
  CHECK(mix.find("op add") == 0);
  CHECK(mix.find("SeqKV vs Seq") != std::string::npos);

  CHECK(std::string(param_runtime_dim.view()).find("parameter 'w' needs static dims, got [Batch,4]") == 0);
  CHECK(std::string(loss_not_scalar.view()).find("loss: must be a real scalar") == 0);
}

// Every pair of buffers that share a slot must have disjoint lifetimes.
template <class P>
constexpr bool plan_is_sound(const P& p) {
  for (int a = 0; a < p.n_buffers; ++a)
    for (int b = a + 1; b < p.n_buffers; ++b) {
      const Buffer &x = p.buffers[std::size_t(a)], &y = p.buffers[std::size_t(b)];
      if (x.slot == y.slot && !(x.end < y.start || y.end < x.start)) return false;
    }
  return true;
}

TEST_CASE("the memory plan shares slots between buffers with disjoint lifetimes", "[graph][plan]") {
  using P = Program<G12>;
  STATIC_REQUIRE(plan_is_sound(P::train_plan));
  STATIC_REQUIRE(plan_is_sound(P::infer_plan));
  CHECK(P::train_plan.n_slots < P::train_plan.n_buffers);
  CHECK(P::infer_plan.n_slots < P::infer_plan.n_buffers);
  // Inference keeps nothing for backward: a handful of slots whatever the depth.
  CHECK(P::infer_plan.n_slots <= 4);
  WARN("12-block MLP: train " << P::train_plan.n_buffers << " buffers in " << P::train_plan.n_slots
                              << " slots; infer " << P::infer_plan.n_buffers << " in " << P::infer_plan.n_slots);
}

static constexpr auto GA = freeze<ctgrad::testing::attention_model<8>>();

TEST_CASE("independent nodes share a forward step", "[graph][plan]") {
  using P = Program<GA>;
  // q, k and v projections have no dependency on each other: one step holds all three matmuls.
  int widest = 0;
  for (int s = 0; s < P::train_plan.n_fwd; ++s)
    widest = std::max(widest, P::train_plan.fwd_begin[std::size_t(s + 1)] - P::train_plan.fwd_begin[std::size_t(s)]);
  CHECK(widest >= 3);
}
