// An independent check of the memory plan: replay the schedules, track which buffer owns each
// slot, and require every read — an op's inputs, what its VJP saved, its scratch, gradients — to
// find its own buffer there. Within one step (whose nodes run concurrently) no slot may be both
// read as one buffer and written as another.
#include <catch2/catch.hpp>

#include "../../bench/compile/encoder.hpp"
#include "../models.hpp"

using namespace ctgrad;

namespace {

template <const auto& G, class P>
constexpr int replay(const P& p) {  // 0 when sound, else 1 + the step of the first violation
  constexpr std::size_t U = P::U;
  std::array<int, U * 3> owner{};
  for (auto& o : owner) o = -1;
  std::array<int, U * 3> read_as{}, written_as{};
  int step_id = 0;
  bool bad = false;
  auto begin_step = [&] {
    for (auto& r : read_as) r = -1;
    for (auto& w : written_as) w = -1;
  };
  auto read = [&](int buf) {
    if (buf < 0) return;
    const int slot = p.buffers[std::size_t(buf)].slot;
    if (owner[std::size_t(slot)] != buf) bad = true;
    if (written_as[std::size_t(slot)] >= 0 && written_as[std::size_t(slot)] != buf) bad = true;
    read_as[std::size_t(slot)] = buf;
  };
  auto write = [&](int buf) {
    if (buf < 0) return;
    const int slot = p.buffers[std::size_t(buf)].slot;
    if (read_as[std::size_t(slot)] >= 0 && read_as[std::size_t(slot)] != buf) bad = true;
    if (written_as[std::size_t(slot)] >= 0 && written_as[std::size_t(slot)] != buf) bad = true;
    written_as[std::size_t(slot)] = buf;
    owner[std::size_t(slot)] = buf;
  };
  for (int s = 0; s < p.n_fwd; ++s, ++step_id) {
    begin_step();
    for (int j = p.fwd_begin[std::size_t(s)]; j < p.fwd_begin[std::size_t(s + 1)]; ++j) {
      const Node& n = G[p.fwd_order[std::size_t(j)]];
      for (int k = 0; k < n.n_in; ++k) read(p.value_buf[std::size_t(n.in[std::size_t(k)])]);
    }
    for (int j = p.fwd_begin[std::size_t(s)]; j < p.fwd_begin[std::size_t(s + 1)]; ++j) {
      const int i = p.fwd_order[std::size_t(j)];
      write(p.value_buf[std::size_t(i)]);
      write(p.scratch_buf[std::size_t(i)]);
    }
    if (bad) return 1 + step_id;
  }
  if (!p.training) return 0;
  begin_step();
  for (int i = 0; i < G.size; ++i)  // seeds
    if ((G.loss >= 0 ? i == G.loss : G[i].is_output) && p.needs_grad[std::size_t(i)]) write(p.grad_buf[std::size_t(i)]);
  for (int b = 0; b < p.n_bwd; ++b, ++step_id) {
    begin_step();
    for (int z = p.zero_begin[std::size_t(b)]; z < p.zero_begin[std::size_t(b + 1)]; ++z)
      write(p.grad_buf[std::size_t(p.zero_order[std::size_t(z)])]);
    begin_step();  // zeroing happens before the step's nodes run
    for (int j = p.bwd_begin[std::size_t(b)]; j < p.bwd_begin[std::size_t(b + 1)]; ++j) {
      const int i = p.bwd_order[std::size_t(j)];
      const Node& n = G[i];
      if (p.vjp_skip[std::size_t(i)]) continue;  // its source's gradient is its own buffer: nothing runs
      read(p.grad_buf[std::size_t(i)]);
      read(p.scratch_buf[std::size_t(i)]);
      if (n.op->saves & kSaveOutput) read(p.value_buf[std::size_t(i)]);
      for (int k = 0; k < n.n_in; ++k) {
        const int src = n.in[std::size_t(k)];
        if (n.op->saves & kSaveInput(k)) read(p.value_buf[std::size_t(src)]);
        if (p.needs_grad[std::size_t(src)]) read(p.grad_buf[std::size_t(src)]);  // read-modify-write
      }
    }
    for (int j = p.bwd_begin[std::size_t(b)]; j < p.bwd_begin[std::size_t(b + 1)]; ++j) {
      const Node& n = G[p.bwd_order[std::size_t(j)]];
      if (p.vjp_skip[std::size_t(p.bwd_order[std::size_t(j)])]) continue;
      for (int k = 0; k < n.n_in; ++k)
        if (p.needs_grad[std::size_t(n.in[std::size_t(k)])]) write(p.grad_buf[std::size_t(n.in[std::size_t(k)])]);
    }
    if (bad) return 1 + step_id;
  }
  // After the step: outputs and input gradients are read by the user.
  begin_step();
  for (int i = 0; i < G.size; ++i) {
    if (G[i].is_output) read(p.value_buf[std::size_t(i)]);
    if (G[i].kind == NodeKind::input && p.needs_grad[std::size_t(i)]) read(p.grad_buf[std::size_t(i)]);
  }
  return bad ? 1 + step_id : 0;
}

template <const auto& G>
constexpr bool replays() {
  using P = Program<G>;
  return replay<G>(P::train_plan) == 0 && replay<G>(P::infer_plan) == 0;
}

static constexpr auto MLP = freeze<ctgrad::testing::mlp_classifier<16, 32, 4, 6>>();
static constexpr auto ATTN = freeze<ctgrad::testing::attention_model<8>>();
static constexpr auto ENC = freeze<bench::encoder<2>>();
static constexpr auto ENCDEC = freeze<bench::encoder_decoder<2>>();

}  // namespace

TEST_CASE("replaying the schedules finds every value and gradient where the plan put it", "[graph][plan]") {
  STATIC_REQUIRE(replays<MLP>());
  STATIC_REQUIRE(replays<ATTN>());
  STATIC_REQUIRE(replays<ENC>());
  STATIC_REQUIRE(replays<ENCDEC>());
}

namespace {
constexpr auto kSquared = [] {  // a is read twice by one mul: its gradient is zeroed, then added to
  Builder g;
  Value a = g.input("a", {Batch, 3}, {.grad = true});
  g.loss(sum(a * a));
  return g;
};
constexpr auto kChain = [] {  // relu is a's only consumer; linear's weight is a parameter
  Builder g;
  Value a = g.input("a", {Batch, 3}, {.grad = true});
  Value w = g.param("w", {2, 3}, init::normal(1.0)), b = g.param("b", {2}, init::zeros());
  g.loss(sum(linear(relu(a), w, b)));
  return g;
};
static constexpr auto SQUARED = freeze<kSquared>();
static constexpr auto CHAIN = freeze<kChain>();

template <const auto& G>
constexpr int node_of(std::string_view op) {
  for (int i = 0; i < G.size; ++i)
    if (G[i].kind == NodeKind::op && std::string_view(G[i].op->name) == op) return i;
  return -1;
}
}  // namespace

TEST_CASE("a gradient's first contributor writes it unless it reads the value twice, and parameter gradients accumulate",
          "[graph][plan]") {
  constexpr const auto& sq = Program<SQUARED>::train_plan;
  STATIC_REQUIRE(!sq.grad_fresh[0]);                        // a: zeroed
  STATIC_REQUIRE(sq.assigns[std::size_t(node_of<SQUARED>("mul"))] == 0);
  STATIC_REQUIRE(sq.grad_fresh[std::size_t(node_of<SQUARED>("mul"))]);  // the product's: sum writes it
  constexpr const auto& ch = Program<CHAIN>::train_plan;
  STATIC_REQUIRE(ch.grad_fresh[0]);
  STATIC_REQUIRE(ch.assigns[std::size_t(node_of<CHAIN>("relu"))] == kSaveInput(0));
  // The relu output's gradient is linear's to write; W and b live in the parameter store, whose
  // gradients add up over backward calls until zero_grad().
  STATIC_REQUIRE(ch.assigns[std::size_t(node_of<CHAIN>("linear"))] == kSaveInput(0));
  STATIC_REQUIRE(replays<SQUARED>());
  STATIC_REQUIRE(replays<CHAIN>());
}

namespace {
constexpr auto kViewChain = [] {  // h -> r -> rr: views only; a has two consumers; b one, a view
  Builder g;
  Value a = g.input("a", {Batch, 6}, {.grad = true});
  Value h = relu(a);
  Value rr = reshape(reshape(h, {Batch, 2, 3}), {Batch, 3, 2});
  Value s = reshape(a, {Batch, 3, 2});
  Value rb = reshape(g.input("b", {Batch, 6}, {.grad = true}), {Batch, 2, 3});  // an input's only consumer
  g.loss(sum(rr * rr) + sum(s) + sum(rb * rb));
  return g;
};
static constexpr auto VIEW_CHAIN = freeze<kViewChain>();
}  // namespace

TEST_CASE("a view that alone adds to its source's gradient shares its gradient buffer and runs no VJP", "[graph][plan]") {
  constexpr const auto& p = Program<VIEW_CHAIN>::train_plan;
  // nodes: a 0, relu 1, reshape 2, reshape 3, reshape of a 4, b 5, reshape of b 6
  STATIC_REQUIRE(std::string_view(VIEW_CHAIN[3].op->name) == "reshape");
  STATIC_REQUIRE(std::string_view(VIEW_CHAIN[4].op->name) == "reshape");
  STATIC_REQUIRE(p.grad_view_of[1] == 3);  // through the chain
  STATIC_REQUIRE(p.grad_view_of[2] == 3);
  STATIC_REQUIRE(p.grad_view_of[3] == -1);
  STATIC_REQUIRE(p.grad_buf[1] == p.grad_buf[3]);
  STATIC_REQUIRE(p.grad_buf[2] == p.grad_buf[3]);
  STATIC_REQUIRE(p.vjp_skip[2]);
  STATIC_REQUIRE(p.vjp_skip[3]);
  STATIC_REQUIRE(!p.grad_fresh[3]);  // read twice by one mul: zeroed, then added to
  // a's gradient has two writers (relu and the reshape): its own buffer, and both VJPs run
  STATIC_REQUIRE(p.grad_view_of[0] == -1);
  STATIC_REQUIRE(!p.vjp_skip[4]);
  STATIC_REQUIRE(p.assigns[4] == kSaveInput(0));  // the higher id of the level goes first and writes it
  STATIC_REQUIRE(p.grad_buf[0] != p.grad_buf[4]);
  // b (node 5) shares its reshape's (6) gradient buffer, which lives to the end: the user reads it.
  STATIC_REQUIRE(std::string_view(VIEW_CHAIN[6].op->name) == "reshape");
  STATIC_REQUIRE(p.grad_view_of[5] == 6);
  STATIC_REQUIRE(p.vjp_skip[6]);
  STATIC_REQUIRE(p.buffers[std::size_t(p.grad_buf[5])].end == p.n_fwd + p.n_bwd);
  // The shared buffer lives until relu's VJP reads it.
  STATIC_REQUIRE(p.buffers[std::size_t(p.grad_buf[3])].end == p.n_fwd + p.bwd_step[1]);
  STATIC_REQUIRE(replays<VIEW_CHAIN>());
  // Nothing shares in the inference plan.
  STATIC_REQUIRE(!Program<VIEW_CHAIN>::infer_plan.vjp_skip[2]);

  Program<VIEW_CHAIN> prog;
  const std::vector<float> a = {-1.0f, 2.0f, 0.5f, -0.25f, 3.0f, 1.5f, 0.75f, -2.0f, 1.0f, 0.0f, -3.0f, 2.5f};
  const std::vector<float> b = {0.5f, -1.5f, 2.0f, 0.25f, -0.75f, 1.0f, 3.0f, -2.5f, 0.125f, 1.75f, -0.5f, 2.25f};
  prog.set_input("a", std::span<const float>(a), {2, 6});
  prog.set_input("b", std::span<const float>(b), {2, 6});
  prog.forward();
  prog.backward();
  const auto ga = prog.input_grad("a"), gb = prog.input_grad("b");
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(ga.data[i] == (a[i] > 0 ? 2 * a[i] : 0.0f) + 1.0f);
  for (std::size_t i = 0; i < b.size(); ++i) CHECK(gb.data[i] == 2 * b[i]);
}
