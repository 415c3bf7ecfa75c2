// An independent check of the memory plan: replay the schedules, track which buffer owns each
// slot and whose value it holds, and require every read — an op's inputs, what its VJP saved, its
// scratch, gradients — to find its own buffer and value there. Within one step (whose nodes run
// concurrently) no slot may be both read as one buffer and written as another, and an op that
// overwrites its input in place must be that value's only reader in its step.
#include <catch2/catch.hpp>
#include <optional>

#include "../../bench/compile/encoder.hpp"
#include "../models.hpp"

#include <ctgrad/models/bert.hpp>
#include <ctgrad/models/gpt.hpp>

using namespace ctgrad;

namespace {

template <const auto& G, class P>
constexpr int replay(const P& p) {  // 0 when sound, else 1 + the step of the first violation
  constexpr std::size_t U = P::U;
  std::array<int, U * 3> owner{};
  for (auto& o : owner) o = -1;
  std::array<int, U * 3> read_as{}, written_as{};
  std::array<int, U * 3> holds{}, value_read_by{};  // the node whose value a slot holds; who read it this step
  for (auto& h : holds) h = -1;
  int step_id = 0;
  bool bad = false;
  auto begin_step = [&] {
    for (auto& r : read_as) r = -1;
    for (auto& w : written_as) w = -1;
    for (auto& r : value_read_by) r = -1;
  };
  auto root = [&](int node) { return p.view_of[std::size_t(node)] >= 0 ? p.view_of[std::size_t(node)] : node; };
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
    holds[std::size_t(slot)] = -1;
  };
  // Node `reader` (-1: the user, or a VJP) reads the value of `node`.
  auto read_value = [&](int node, int reader) {
    const int buf = p.value_buf[std::size_t(node)];
    read(buf);
    if (buf < 0) return;
    const auto slot = std::size_t(p.buffers[std::size_t(buf)].slot);
    if (holds[slot] != root(node)) bad = true;
    value_read_by[slot] = value_read_by[slot] == -1 || value_read_by[slot] == reader ? reader : -2;
  };
  // Forward node i writes its value: a view writes nothing; in place, i must be its input's only reader.
  auto write_value = [&](int i) {
    const int buf = p.value_buf[std::size_t(i)];
    if (buf < 0 || p.view_of[std::size_t(i)] >= 0) return;
    const auto slot = std::size_t(p.buffers[std::size_t(buf)].slot);
    const int src = p.in_place_of[std::size_t(i)];
    if (src >= 0 && (p.value_buf[std::size_t(src)] != buf || holds[slot] != root(src) || value_read_by[slot] != i)) bad = true;
    if (src < 0 && holds[slot] >= 0 && owner[slot] == buf) bad = true;  // overwrites a value it did not take over
    write(buf);
    holds[slot] = i;
  };
  for (int s = 0; s < p.n_fwd; ++s, ++step_id) {
    begin_step();
    for (int j = p.fwd_begin[std::size_t(s)]; j < p.fwd_begin[std::size_t(s + 1)]; ++j) {
      const int i = p.fwd_order[std::size_t(j)];
      const Node& n = G[i];
      for (int k = 0; k < n.n_in; ++k)
        if (G[n.in[std::size_t(k)]].kind == NodeKind::op) read_value(n.in[std::size_t(k)], i);
    }
    for (int j = p.fwd_begin[std::size_t(s)]; j < p.fwd_begin[std::size_t(s + 1)]; ++j) {
      const int i = p.fwd_order[std::size_t(j)];
      write_value(i);
      write(p.scratch_buf[std::size_t(i)]);
    }
    if (bad) return 1 + step_id;
  }
  if (p.training) {
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
      if (n.op->saves & kSaveOutput) read_value(i, -1);
      for (int k = 0; k < n.n_in; ++k) {
        const int src = n.in[std::size_t(k)];
        if ((n.op->saves & kSaveInput(k)) && G[src].kind == NodeKind::op) read_value(src, -1);
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
  }
  // After the step: outputs and input gradients are read by the user.
  begin_step();
  for (int i = 0; i < G.size; ++i) {
    if (G[i].is_output && G[i].kind == NodeKind::op) read_value(i, -1);
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

namespace {
// u -> dropout -> dropout: both in place (u's and the first dropout's only reader is the next
// node). v is read by a dropout and a sum in the same step: that dropout gets a buffer of its own.
// kKeepU makes u an output, which keeps it alive: the same nodes, the first dropout not in place.
template <bool kKeepU>
constexpr auto dropout_graph = [] {
  Builder g;
  Value a = g.input("a", {Batch, 6}, {.grad = true});
  Value w = g.param("w", {6, 6}, init::normal(1.0)), b = g.param("b", {6}, init::normal(1.0));
  const Real p = g.hyper("dropout", 0.3);
  Value u = linear(a, w, b);
  Value d = dropout(dropout(u, p), p);
  Value v = linear(a, w, b);
  Value dv = dropout(v, p);
  if (kKeepU) g.output(u, "u");
  g.output(d, "d");
  g.output(dv, "dv");
  g.loss(sum(linear(d, w, b) * dv) + sum(v));
  return g;
};
static constexpr auto IN_PLACE = freeze<dropout_graph<false>>();
static constexpr auto GPT_MICRO = freeze<models::gpt, models::GptConfig{.vocab = 11, .n_layer = 2, .n_head = 2, .d_model = 8, .context = 8}>();
static constexpr auto BERT_MICRO =
    freeze<models::bert_mlm, models::BertConfig{.vocab = 13, .n_layer = 2, .heads = 2, .d_model = 8, .d_ff = 12, .context = 8}>();
static constexpr auto BERT_MICRO_PRE = freeze<models::bert_mlm, models::BertConfig{
    .vocab = 13, .n_layer = 1, .heads = 2, .d_model = 8, .d_ff = 12, .context = 8, .pre_norm = true}>();
template <class P>
constexpr int in_place_count(const P& p) {
  int c = 0;
  for (int v : p.in_place_of) c += v >= 0;
  return c;
}
static constexpr auto KEPT = freeze<dropout_graph<true>>();

template <const auto& G>
constexpr int nth_node(std::string_view op, int k) {
  for (int i = 0; i < G.size; ++i)
    if (G[i].kind == NodeKind::op && std::string_view(G[i].op->name) == op && k-- == 0) return i;
  return -1;
}
}  // namespace

TEST_CASE("a dropout overwrites its input, and its VJP its output's gradient, in place when nothing else reads them, and the results do not change",
          "[graph][plan]") {
  constexpr int u = nth_node<IN_PLACE>("linear", 0), d1 = nth_node<IN_PLACE>("dropout", 0),
                d2 = nth_node<IN_PLACE>("dropout", 1), dv = nth_node<IN_PLACE>("dropout", 2);
  STATIC_REQUIRE((u >= 0 && d1 >= 0 && d2 >= 0 && dv >= 0));
  for (const auto* p : {&Program<IN_PLACE>::train_plan, &Program<IN_PLACE>::infer_plan}) {
    CHECK(p->in_place_of[std::size_t(d1)] == u);
    CHECK(p->in_place_of[std::size_t(d2)] == d1);
    CHECK(p->value_buf[std::size_t(d2)] == p->value_buf[std::size_t(u)]);
    CHECK(p->in_place_of[std::size_t(dv)] == -1);  // v's sum runs in the same step
    CHECK(p->value_buf[std::size_t(dv)] != p->value_buf[std::size_t(nth_node<IN_PLACE>("linear", 1))]);
  }
  for (const auto* p : {&Program<KEPT>::train_plan, &Program<KEPT>::infer_plan}) {  // u is read at the end
    CHECK(p->in_place_of[std::size_t(d1)] == -1);
    CHECK(p->in_place_of[std::size_t(d2)] == d1);
    CHECK(p->in_place_of[std::size_t(dv)] == -1);
  }
  // Gradients too: u, d1 and d2 share d2's gradient buffer, and both VJPs run on it in place,
  // told to assign; v has two readers whose VJPs add to its gradient: its own buffer.
  constexpr const auto& t = Program<IN_PLACE>::train_plan;
  STATIC_REQUIRE(t.grad_buf[std::size_t(u)] == t.grad_buf[std::size_t(d2)]);
  STATIC_REQUIRE(t.grad_buf[std::size_t(d1)] == t.grad_buf[std::size_t(d2)]);
  STATIC_REQUIRE((t.assigns[std::size_t(d1)] & kSaveInput(0)) != 0);
  STATIC_REQUIRE((t.assigns[std::size_t(d2)] & kSaveInput(0)) != 0);
  STATIC_REQUIRE((!t.vjp_skip[std::size_t(d1)] && !t.vjp_skip[std::size_t(d2)]));
  STATIC_REQUIRE(t.grad_buf[std::size_t(dv)] != t.grad_buf[std::size_t(nth_node<IN_PLACE>("linear", 1))]);
  STATIC_REQUIRE(replays<IN_PLACE>());
  STATIC_REQUIRE(replays<KEPT>());
  // The replay is not blind to in-place writes: dv over v, whose sum reads it in the same step, fails.
  constexpr int v = nth_node<IN_PLACE>("linear", 1);
  constexpr auto racing = [] {
    auto p = Program<IN_PLACE>::train_plan;
    p.in_place_of[std::size_t(dv)] = v;
    p.value_buf[std::size_t(dv)] = p.value_buf[std::size_t(v)];
    return p;
  }();
  STATIC_REQUIRE(replay<IN_PLACE>(racing) != 0);
  // The models' own dropouts (embedding, attention output, feed-forward; pre- and post-norm).
  STATIC_REQUIRE(replays<GPT_MICRO>());
  STATIC_REQUIRE(replays<BERT_MICRO>());
  STATIC_REQUIRE(replays<BERT_MICRO_PRE>());
  STATIC_REQUIRE(in_place_count(Program<GPT_MICRO>::train_plan) > 0);
  STATIC_REQUIRE(in_place_count(Program<BERT_MICRO>::train_plan) > 0);
  STATIC_REQUIRE(in_place_count(Program<BERT_MICRO_PRE>::infer_plan) > 0);

  // Same nodes, same ids: the same masks, so the same bits, in training (active and at p = 0)
  // and in inference.
  Program<IN_PLACE> in_place(Options{.seed = 3});
  Program<KEPT> kept(Options{.seed = 3});
  std::vector<float> a(5 * 6);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 7) * 0.25f - 0.8f;
  for (double rate : {0.3, 0.0}) {
    for (Mode mode : {Mode::train, Mode::infer}) {
      in_place.set_hyper("dropout", rate);
      kept.set_hyper("dropout", rate);
      in_place.set_input("a", std::span<const float>(a), {5, 6});
      kept.set_input("a", std::span<const float>(a), {5, 6});
      in_place.forward(mode);
      kept.forward(mode);
      INFO("dropout " << rate << (mode == Mode::train ? ", training" : ", inference"));
      for (const char* out : {"d", "dv"})
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(in_place.output(out).data[i] == kept.output(out).data[i]);
      CHECK(in_place.loss() == kept.loss());
      if (mode == Mode::train) {
        in_place.zero_grad();
        kept.zero_grad();
        in_place.backward();
        kept.backward();
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(in_place.input_grad("a").data[i] == kept.input_grad("a").data[i]);
        for (std::size_t i = 0; i < 36; ++i) CHECK(in_place.parameter("w").grad.data[i] == kept.parameter("w").grad.data[i]);
      }
    }
  }
}

TEST_CASE("a hyperparameter changed between a forward and its backward applies from the next forward, and the backward's dropout masks match its forward's",
          "[graph][executor]") {
  std::vector<float> a(5 * 6);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 5) * 0.3f - 0.6f;
  auto step = [&](Program<IN_PLACE>& p, double forward_rate, std::optional<double> rate_before_backward) {
    p.set_hyper("dropout", forward_rate);
    p.set_input("a", std::span<const float>(a), {5, 6});
    p.forward(Mode::train);
    if (rate_before_backward) p.set_hyper("dropout", *rate_before_backward);
    p.zero_grad();
    p.backward();
    return std::vector<float>(p.input_grad("a").data, p.input_grad("a").data + a.size());
  };
  for (double later : {0.0, 0.6}) {
    INFO("rate 0.3 in the forward, " << later << " before the backward");
    Program<IN_PLACE> changed(Options{.seed = 5}), steady(Options{.seed = 5});
    const std::vector<float> g_changed = step(changed, 0.3, later), g_steady = step(steady, 0.3, std::nullopt);
    CHECK(g_changed == g_steady);
    CHECK(changed.hyper("dropout") == later);
    for (std::size_t i = 0; i < 36; ++i) CHECK(changed.parameter("w").grad.data[i] == steady.parameter("w").grad.data[i]);
    // The next step runs at the new rate, forward and backward alike.
    const std::vector<float> next_changed = step(changed, later, std::nullopt), next_steady = step(steady, later, std::nullopt);
    CHECK(next_changed == next_steady);
    CHECK(changed.loss() == steady.loss());
  }
  // The rates give different gradients, so the comparisons above tell them apart. (Without the
  // executor's kept attributes this case fails: 74 of its 81 checks.)
  Program<IN_PLACE> p3(Options{.seed = 5}), p0(Options{.seed = 5});
  CHECK(step(p3, 0.3, std::nullopt) != step(p0, 0.0, std::nullopt));
}

namespace {
// Every elementwise op declared in place, where the plan must and must not give it its input's
// buffer. kKeep makes the linears' outputs graph outputs (alive to the end): the same nodes,
// none of the first four in place, and the same bits.
template <bool kKeep>
constexpr auto elementwise_graph = [] {
  Builder g;
  Value a = g.input("a", {Batch, 6}, {.grad = true});
  Value w = g.param("w", {6, 6}, init::normal(0.4)), b = g.param("b", {6}, init::normal(0.4));
  Value u1 = linear(a, w, b);
  Value r = relu(u1);  // relu's VJP reads its output, linear's VJP not its own: takes u1's buffer
  Value u2 = linear(r, w, b);
  Value t = tanh(u2);  // the same
  Value u3 = linear(t, w, b);
  Value ge = gelu(u3);  // gelu's VJP reads u3: in place only in inference
  Value u4 = linear(ge, w, b);
  Value h = add(u4, ge);  // a residual: the sum takes the branch's buffer, never ge's
  if (kKeep) {
    g.output(u1, "u1");
    g.output(u2, "u2");
    g.output(u3, "u3");
    g.output(u4, "u4");
  }
  Value e = exp(scale(h, 0.25));          // exp over scale's value; scale not over h (read later)
  Value sg = neg(sigmoid(e));             // exp's and sigmoid's VJPs read their outputs: inference only
  Value from_input = relu(a);             // a graph input: never
  Value from_param = tanh(w);             // a parameter: never
  Value q = linear(h, w, b);
  Value twice = add(q, q);                // q is input 1 too: never
  Value bias_first = add(scale(b, 2.0), twice);  // input 0 [6], output [Batch, 6]: never
  Value p = linear(sg, w, b);
  Value e1 = exp(p), e2 = scale(p, 2.0);  // p read by both in one step: neither
  Value viewed = relu(reshape(linear(e1, w, b), {Batch, 2, 3}));  // a view's source: never
  g.loss(sum(bias_first * h) + sum(from_input) + sum(from_param) + sum(e1 * e2) + sum(viewed * viewed));
  return g;
};
static constexpr auto ELEMENTWISE = freeze<elementwise_graph<false>>();
static constexpr auto ELEMENTWISE_KEPT = freeze<elementwise_graph<true>>();
}  // namespace

TEST_CASE("the plan runs relu, tanh, add, scale and the unary ops in place exactly where nothing else reads their input 0, and the bits do not change",
          "[graph][plan]") {
  constexpr const auto& G = ELEMENTWISE;
  constexpr int u1 = nth_node<G>("linear", 0), u2 = nth_node<G>("linear", 1), u3 = nth_node<G>("linear", 2),
                u4 = nth_node<G>("linear", 3), last = nth_node<G>("linear", 6);
  constexpr int r = nth_node<G>("relu", 0), from_input = nth_node<G>("relu", 1), viewed = nth_node<G>("relu", 2);
  constexpr int t = nth_node<G>("tanh", 0), from_param = nth_node<G>("tanh", 1), ge = nth_node<G>("gelu", 0);
  constexpr int h = nth_node<G>("add", 0), twice = nth_node<G>("add", 1), bias_first = nth_node<G>("add", 2);
  constexpr int s = nth_node<G>("scale", 0), sb = nth_node<G>("scale", 1), e2 = nth_node<G>("scale", 2);
  constexpr int e = nth_node<G>("exp", 0), e1 = nth_node<G>("exp", 1), sg = nth_node<G>("sigmoid", 0), ng = nth_node<G>("neg", 0);
  STATIC_REQUIRE((last >= 0 && viewed >= 0 && e2 >= 0 && ng >= 0 && bias_first >= 0));
  constexpr const auto& train = Program<G>::train_plan;
  constexpr const auto& infer = Program<G>::infer_plan;
  auto of = [](const auto& plan, int node) { return plan.in_place_of[std::size_t(node)]; };
  auto shares = [](const auto& plan, int node, int src) {
    return plan.value_buf[std::size_t(node)] == plan.value_buf[std::size_t(src)];
  };
  for (const auto* plan : {&train, &infer}) {
    INFO((plan == &train ? "training plan" : "inference plan"));
    CHECK(of(*plan, r) == u1);
    CHECK(shares(*plan, r, u1));
    CHECK(of(*plan, t) == u2);
    CHECK(of(*plan, h) == u4);
    CHECK(shares(*plan, h, u4));
    CHECK(!shares(*plan, h, ge));
    CHECK(of(*plan, s) == -1);  // h is read later (q, bias_first's add)
    CHECK(of(*plan, e) == s);
    for (int never : {from_input, from_param, twice, bias_first, sb, e1, e2, viewed}) {
      INFO("node " << never << " (" << G[never].op->name << ")");
      CHECK(of(*plan, never) == -1);
    }
  }
  // The ops whose VJP reads what they would overwrite: in place only where no VJP runs.
  CHECK(of(train, ge) == -1);
  CHECK(of(infer, ge) == u3);
  CHECK(of(train, sg) == -1);
  CHECK(of(infer, sg) == e);
  CHECK(of(train, ng) == -1);
  CHECK(of(infer, ng) == sg);
  for (const auto* plan : {&Program<ELEMENTWISE_KEPT>::train_plan, &Program<ELEMENTWISE_KEPT>::infer_plan})
    for (int kept : {r, t, ge, h}) {
      INFO("kept: node " << kept);
      CHECK(of(*plan, kept) == -1);
    }
  STATIC_REQUIRE(replays<ELEMENTWISE>());
  STATIC_REQUIRE(replays<ELEMENTWISE_KEPT>());

  // The same step with and without the in-place writes: the same bits.
  Program<ELEMENTWISE> in_place(Options{.seed = 7});
  Program<ELEMENTWISE_KEPT> kept(Options{.seed = 7});
  std::vector<float> a(5 * 6);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 9) * 0.2f - 0.7f;
  for (Mode mode : {Mode::train, Mode::infer}) {
    INFO((mode == Mode::train ? "training" : "inference"));
    in_place.set_input("a", std::span<const float>(a), {5, 6});
    kept.set_input("a", std::span<const float>(a), {5, 6});
    in_place.forward(mode);
    kept.forward(mode);
    CHECK(std::isfinite(in_place.loss()));
    CHECK(in_place.loss() == kept.loss());
    if (mode != Mode::train) continue;
    in_place.zero_grad();
    kept.zero_grad();
    in_place.backward();
    kept.backward();
    int differ = 0, nonzero = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      differ += in_place.input_grad("a").data[i] != kept.input_grad("a").data[i];
      nonzero += in_place.input_grad("a").data[i] != 0.0f;
    }
    for (const char* name : {"w", "b"}) {
      const auto pa = in_place.parameter(name), pb = kept.parameter(name);
      for (std::int64_t i = 0; i < pa.grad.numel; ++i) differ += pa.grad.data[i] != pb.grad.data[i];
    }
    CHECK(differ == 0);
    CHECK(nonzero > 0);
  }
}
