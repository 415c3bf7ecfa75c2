// scan (graph/scan.hpp): a recurrence over a runtime number of steps, against the same model
// unrolled by hand over a fixed number, in double; gradchecks over several lengths; masks,
// reverse, recompute, threads and the RNG per step; errors naming the user's line.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>

using namespace ctgrad;

namespace {

constexpr int kIn = 3, kH = 4, kC = 2, kSteps = 5;

struct CellParams {
  Value w_in, b_in, w_rec, w_c, b_c;
};
constexpr CellParams cell_params(const Scope& s) {
  return {s.param("in.weight", {kH, kIn}, init::normal(0.5)), s.param("in.bias", {kH}, init::normal(0.5)),
          s.param("rec.weight", {kH, kH}, init::normal(0.5)), s.param("c.weight", {kC, kH}, init::normal(0.5)),
          s.param("c.bias", {kC}, init::normal(0.5))};
}
// Two states (h, c), a value read from outside (ctx), two step outputs (h, sigmoid(c)).
struct Cell {
  Value h, c, out;
};
constexpr Cell cell(const CellParams& p, Value x, Value h, Value c, Value ctx) {
  Value hn = tanh(linear(x, p.w_in, p.b_in) + matmul(h, p.w_rec, {.trans_b = true}) + ctx);
  Value cn = c + linear(hn, p.w_c, p.b_c);
  return {hn, cn, sigmoid(cn)};
}

// The loss reads every result of the scan through random probes.
constexpr Value probed(Builder& g, std::initializer_list<std::pair<const char*, Value>> results) {
  Value loss{};
  bool first = true;
  for (const auto& [name, v] : results) {
    Value term = sum(v * g.input(name, v.shape()));
    loss = first ? term : loss + term;
    first = false;
  }
  return loss;
}

template <bool kReverse, bool kRecompute>
constexpr Builder scanned() {
  Builder g;
  Value x = g.input("x", {Batch, Seq, kIn}, {.grad = true});
  Value h0 = g.input("h0", {Batch, kH}, {.grad = true});
  Value ctx = tanh(g.input("ctx", {Batch, kH}, {.grad = true}));
  Value mask = g.input("mask", {Batch, Seq}, {.dtype = DType::index});
  const CellParams p = cell_params(g.scope("rnn"));
  ScanResult r = scan(g.scope("rnn"), {.init = {h0, scan_zeros({Batch, kC})}, .xs = {x}, .mask = mask, .reverse = kReverse, .recompute = kRecompute},
                      [&](const Scope&, const ScanStep& t) -> ScanStepResult {
                        const Cell c = cell(p, t.x[0], t.state[0], t.state[1], ctx);
                        return {.state = {c.h, c.c}, .out = {c.h, c.out}};
                      });
  g.loss(probed(g, {{"p_h", r.seq[0]}, {"p_out", r.seq[1]}, {"p_hT", r.last[0]}, {"p_cT", r.last[1]}}));
  return g;
}

// The same, unrolled over kSteps by hand: the mask as reals (and its complement), a masked row
// keeping its state and giving zeros.
template <bool kReverse>
constexpr Builder unrolled() {
  Builder g;
  Value x = g.input("x", {Batch, kSteps, kIn}, {.grad = true});
  Value h = g.input("h0", {Batch, kH}, {.grad = true});
  Value ctx = tanh(g.input("ctx", {Batch, kH}, {.grad = true}));
  Value m = g.input("mask_real", {Batch, kSteps}), keep = g.input("keep_real", {Batch, kSteps});
  Value c = g.input("c0", {Batch, kC});
  const CellParams p = cell_params(g.scope("rnn"));
  std::vector<Value> hs(kSteps), outs(kSteps);
  for (int s = 0; s < kSteps; ++s) {
    const int t = kReverse ? kSteps - 1 - s : s;
    Value xt = reshape(slice(x, 1, t, 1), {Batch, kIn});
    Value mt = reshape(slice(m, 1, t, 1), {Batch, 1}), kt = reshape(slice(keep, 1, t, 1), {Batch, 1});
    const Cell n = cell(p, xt, h, c, ctx);
    h = n.h * mt + h * kt;
    c = n.c * mt + c * kt;
    hs[std::size_t(t)] = reshape(n.h * mt, {Batch, 1, kH});
    outs[std::size_t(t)] = reshape(n.out * mt, {Batch, 1, kC});
  }
  Value seq_h = concat({hs[0], hs[1], hs[2], hs[3], hs[4]}, 1), seq_out = concat({outs[0], outs[1], outs[2], outs[3], outs[4]}, 1);
  g.loss(probed(g, {{"p_h", seq_h}, {"p_out", seq_out}, {"p_hT", h}, {"p_cT", c}}));
  return g;
}

constexpr auto scan_fwd = [] { return scanned<false, false>(); };
constexpr auto scan_rev = [] { return scanned<true, false>(); };
constexpr auto scan_fwd_recompute = [] { return scanned<false, true>(); };
constexpr auto scan_rev_recompute = [] { return scanned<true, true>(); };
constexpr auto unrolled_fwd = [] { return unrolled<false>(); };
constexpr auto unrolled_rev = [] { return unrolled<true>(); };
static constexpr auto ScanFwd = freeze<scan_fwd>();
static constexpr auto ScanRev = freeze<scan_rev>();
static constexpr auto ScanFwdRecompute = freeze<scan_fwd_recompute>();
static constexpr auto ScanRevRecompute = freeze<scan_rev_recompute>();
static constexpr auto UnrolledFwd = freeze<unrolled_fwd>();
static constexpr auto UnrolledRev = freeze<unrolled_rev>();

constexpr std::int64_t kBatch = 3;

template <class T>
std::vector<T> draws(std::uint64_t seed, std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = T(random::normal(random::key(seed, "draw"), i));
  return v;
}

// Sets the inputs both graphs share; mask row b holds lengths[b] ones (from the end when `from_end`).
template <class P, class T>
void set_common(P& p, std::int64_t steps, std::span<const std::int32_t> mask) {
  p.set_input("x", std::span<const T>(draws<T>(1, std::size_t(kBatch * steps * kIn))), {kBatch, steps, kIn});
  p.set_input("h0", std::span<const T>(draws<T>(2, kBatch * kH)), {kBatch, kH});
  p.set_input("ctx", std::span<const T>(draws<T>(3, kBatch * kH)), {kBatch, kH});
  p.set_input("p_h", std::span<const T>(draws<T>(4, std::size_t(kBatch * steps * kH))), {kBatch, steps, kH});
  p.set_input("p_out", std::span<const T>(draws<T>(5, std::size_t(kBatch * steps * kC))), {kBatch, steps, kC});
  p.set_input("p_hT", std::span<const T>(draws<T>(6, kBatch * kH)), {kBatch, kH});
  p.set_input("p_cT", std::span<const T>(draws<T>(7, kBatch * kC)), {kBatch, kC});
  (void)mask;
}

template <const auto& G, class T = double>
struct Run {
  Program<G, T> p;
  explicit Run(int threads = 1) : p({.threads = threads, .seed = 11}) {}
  void step() {
    p.zero_grad();
    p.forward();
    p.backward();
  }
};

// Every parameter's and input's gradient of a, b, and their losses: equal within rtol.
template <class A, class B>
void require_same_gradients(A& a, B& b, double rtol) {
  REQUIRE(a.loss() == Approx(b.loss()).epsilon(rtol));
  REQUIRE(a.parameters().size() == b.parameters().size());
  for (std::size_t i = 0; i < a.parameters().size(); ++i) {
    const auto& pa = a.parameters()[i];
    const auto& pb = b.parameter(pa.name);
    for (std::int64_t e = 0; e < pa.grad.numel; ++e) {
      INFO(pa.name << "[" << e << "]");
      REQUIRE(double(pa.grad.data[e]) == Approx(double(pb.grad.data[e])).epsilon(rtol).margin(rtol));
    }
  }
  for (const char* in : {"x", "h0", "ctx"}) {
    auto ga = a.input_grad(in), gb = b.input_grad(in);
    REQUIRE(ga.numel == gb.numel);
    for (std::int64_t e = 0; e < ga.numel; ++e) {
      INFO(in << "[" << e << "]");
      REQUIRE(double(ga.data[e]) == Approx(double(gb.data[e])).epsilon(rtol).margin(rtol));
    }
  }
}

template <class A, class B>
void require_bitwise(A& a, B& b) {
  REQUIRE(a.loss() == b.loss());
  for (std::size_t i = 0; i < a.parameters().size(); ++i) {
    const auto& pa = a.parameters()[i];
    const auto& pb = b.parameters()[i];
    INFO(pa.name);
    REQUIRE(std::memcmp(pa.grad.data, pb.grad.data, std::size_t(pa.grad.numel) * sizeof(pa.grad.data[0])) == 0);
  }
  for (const char* in : {"x", "h0", "ctx"}) {
    auto ga = a.input_grad(in), gb = b.input_grad(in);
    INFO(in);
    REQUIRE(std::memcmp(ga.data, gb.data, std::size_t(ga.numel) * sizeof(ga.data[0])) == 0);
  }
}

template <class A, class B>
void require_bitwise_parameters(A& a, B& b) {
  REQUIRE(a.loss() == b.loss());
  for (std::size_t i = 0; i < a.parameters().size(); ++i) {
    const auto& pa = a.parameters()[i];
    const auto& pb = b.parameters()[i];
    INFO(pa.name);
    REQUIRE(std::memcmp(pa.grad.data, pb.grad.data, std::size_t(pa.grad.numel) * sizeof(pa.grad.data[0])) == 0);
  }
}

// One training step of each program on the inputs `set` gives it.
template <class Set>
void train_step(std::initializer_list<Executor<float>*> programs, Set set) {
  for (Executor<float>* p : programs) {
    set(*p);
    p->zero_grad();
    p->forward();
    p->backward();
  }
}

std::vector<std::int32_t> mask_of(std::initializer_list<int> lengths, std::int64_t steps, bool from_end) {
  std::vector<std::int32_t> m;
  for (int len : lengths)
    for (std::int64_t t = 0; t < steps; ++t) m.push_back(from_end ? t >= steps - len : t < len);
  return m;
}

template <const auto& S, const auto& U>
void check_against_unrolled(bool from_end) {
  for (auto lengths : {std::initializer_list<int>{5, 5, 5}, std::initializer_list<int>{5, 3, 1}}) {
    const std::vector<std::int32_t> mask = mask_of(lengths, kSteps, from_end);
    std::vector<double> mr(mask.begin(), mask.end()), keep(mask.size()), c0(kBatch * kC, 0.0);
    for (std::size_t i = 0; i < mask.size(); ++i) keep[i] = 1.0 - mr[i];
    Run<S> s;
    Run<U> u;
    set_common<Program<S, double>, double>(s.p, kSteps, mask);
    set_common<Program<U, double>, double>(u.p, kSteps, mask);
    s.p.set_input("mask", std::span<const std::int32_t>(mask), {kBatch, kSteps});
    u.p.set_input("mask_real", std::span<const double>(mr), {kBatch, kSteps});
    u.p.set_input("keep_real", std::span<const double>(keep), {kBatch, kSteps});
    u.p.set_input("c0", std::span<const double>(c0), {kBatch, kC});
    s.step();
    u.step();
    require_same_gradients(s.p, u.p, 1e-12);
  }
}

}  // namespace

TEST_CASE("scan: the recurrence unrolled by hand, forward and backward, with masks", "[graph][scan]") {
  check_against_unrolled<ScanFwd, UnrolledFwd>(false);
  check_against_unrolled<ScanRev, UnrolledRev>(true);
}

namespace {
template <const auto& G>
void gradcheck_lengths() {
  for (std::int64_t steps : {1, 4, 9}) {
    RandomInputs in{.seed = 40 + std::uint64_t(steps), .sym = {2, steps, 1, 1, 1, 1}, .index_range = 2};
    GradcheckResult r = gradcheck<G>(in, {.max_per_tensor = 16});
    INFO("steps " << steps << ": worst " << r.worst << "\n" << r.report);
    CHECK(r.checked > 0);
    CHECK(r.ok);
  }
}
}  // namespace

TEST_CASE("scan: gradcheck in double over several lengths, masked, reversed, recomputed", "[graph][scan]") {
  gradcheck_lengths<ScanFwd>();
  gradcheck_lengths<ScanRev>();
  gradcheck_lengths<ScanRevRecompute>();
}

TEST_CASE("scan: recompute and thread counts give the same bits", "[graph][scan]") {
  const std::int64_t steps = 7;
  const std::vector<std::int32_t> mask = mask_of({7, 4, 2}, steps, false);
  auto run = [&](auto& r) {
    set_common<std::remove_reference_t<decltype(r.p)>, float>(r.p, steps, mask);
    r.p.set_input("mask", std::span<const std::int32_t>(mask), {kBatch, steps});
    r.step();
  };
  Run<ScanFwd, float> saved(1), two(2);
  Run<ScanFwdRecompute, float> again(1), again2(2);
  run(saved), run(two), run(again), run(again2);
  require_bitwise(saved.p, two.p);
  require_bitwise(saved.p, again.p);
  require_bitwise(saved.p, again2.p);
  CHECK(again.p.arena_bytes() <= saved.p.arena_bytes());
}

namespace {
// A body with values its VJPs read that are not its results: an MLP between the states.
template <bool kRecompute>
constexpr Builder mlp_scan() {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 8});
  ScanResult r = scan(g.scope("rnn"), {.init = {scan_zeros({Batch, 16})}, .xs = {x}, .recompute = kRecompute},
                      [&](const Scope& s, const ScanStep& t) -> ScanStepResult {
                        Value a = tanh(layers::linear(s.scope("l1"), concat({t.x[0], t.state[0]}, 1), 64));
                        Value h = tanh(layers::linear(s.scope("l2"), a, 16));
                        return {.state = {h}, .out = {}};
                      });
  g.loss(sum(r.last[0]));
  return g;
}
constexpr auto mlp_saved = [] { return mlp_scan<false>(); };
constexpr auto mlp_recomputed = [] { return mlp_scan<true>(); };
static constexpr auto MlpSaved = freeze<mlp_saved>();
static constexpr auto MlpRecomputed = freeze<mlp_recomputed>();
}  // namespace

TEST_CASE("scan: recompute keeps the states per step, not the values the VJPs read", "[graph][scan]") {
  const std::int64_t steps = 50, batch = 4;
  const std::vector<float> x = draws<float>(9, std::size_t(steps * batch * 8));
  Program<MlpSaved, float> saved({.seed = 3});
  Program<MlpRecomputed, float> again({.seed = 3});
  train_step({&saved, &again}, [&](Executor<float>& p) { p.set_input("x", std::span<const float>(x), {batch, steps, 8}); });
  require_bitwise_parameters(saved, again);
  // Saved per step: the concat (24), a (64), h (16) floats a row; recomputed: h only.
  INFO("saved " << saved.arena_bytes() << " bytes, recomputed " << again.arena_bytes());
  CHECK(double(again.arena_bytes()) < 0.5 * double(saved.arena_bytes()));
}

namespace {
// Dropout in the body: each step draws its own mask, the same in a recomputed step.
template <bool kRecompute>
constexpr Builder dropout_scan() {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 64}, {.grad = true});
  ScanResult r = scan(g.scope("rnn"), {.init = {scan_zeros({Batch, 64})}, .xs = {x}, .recompute = kRecompute},
                      [&](const Scope&, const ScanStep& t) -> ScanStepResult {
                        const Real p = g.hyper("dropout", 0.5);
                        Value h = tanh(dropout(t.x[0], p) + t.state[0]);
                        return {.state = {h}, .out = {dropout(t.x[0], p)}};
                      });
  g.loss(sum(r.seq[0] * g.input("probe", {Batch, Seq, 64})) + sum(r.last[0]));
  return g;
}
constexpr auto dropout_saved = [] { return dropout_scan<false>(); };
constexpr auto dropout_recomputed = [] { return dropout_scan<true>(); };
static constexpr auto DropoutSaved = freeze<dropout_saved>();
static constexpr auto DropoutRecomputed = freeze<dropout_recomputed>();
}  // namespace

TEST_CASE("scan: dropout in the body draws a mask per step, the same when recomputed", "[graph][scan]") {
  const std::int64_t steps = 3, batch = 2;
  const std::vector<float> ones(std::size_t(batch * steps * 64), 1.0f);
  Program<DropoutSaved, float> saved({.threads = 1, .seed = 5});
  Program<DropoutRecomputed, float> again({.threads = 2, .seed = 5});
  train_step({&saved, &again}, [&](Executor<float>& p) {
    p.set_input("x", std::span<const float>(ones), {batch, steps, 64});
    p.set_input("probe", std::span<const float>(ones), {batch, steps, 64});
  });
  // x's gradients at steps 0 and 1 differ (x is all ones: the masks show).
  const auto xg = saved.input_grad("x");
  int differ = 0;
  for (int e = 0; e < 64; ++e) differ += xg.data[e] != xg.data[64 + e];
  CHECK(differ > 10);
  REQUIRE(saved.loss() == again.loss());
  const auto xg2 = again.input_grad("x");
  CHECK(std::memcmp(xg.data, xg2.data, std::size_t(xg.numel) * sizeof(float)) == 0);
  // A rate changed between a forward and its backward: the backward (and a recomputed step) runs
  // with the forward's.
  for (auto* p : {static_cast<Executor<float>*>(&saved), static_cast<Executor<float>*>(&again)}) {
    p->zero_grad();
    p->forward();
    p->set_hyper("dropout", 0.1);
    p->backward();
    p->set_hyper("dropout", 0.5);
  }
  const auto xa = saved.input_grad("x"), xb = again.input_grad("x");
  CHECK(std::memcmp(xa.data, xb.data, std::size_t(xa.numel) * sizeof(float)) == 0);
}

TEST_CASE("scan: inference at another length between training steps leaves training as a fresh program's", "[graph][scan]") {
  const std::vector<std::int32_t> mask = mask_of({7, 4, 2}, 7, true), short_mask = mask_of({3, 1, 2}, 3, false);
  auto train = [&](auto& r) {
    set_common<std::remove_reference_t<decltype(r.p)>, float>(r.p, 7, mask);
    r.p.set_input("mask", std::span<const std::int32_t>(mask), {kBatch, 7});
    r.step();
  };
  Run<ScanRevRecompute, float> fresh(2), used(2);
  train(used);
  set_common<Program<ScanRevRecompute, float>, float>(used.p, 3, short_mask);
  used.p.set_input("mask", std::span<const std::int32_t>(short_mask), {kBatch, 3});
  used.p.forward(Mode::infer);
  train(used);
  train(fresh);
  train(fresh);
  require_bitwise(fresh.p, used.p);
}

namespace {
constexpr int kScanLine = __LINE__ + 4;
constexpr Msg wrong_state_shape() {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 3});
  scan(g.scope("rnn"), {.init = {scan_zeros({Batch, 4})}, .xs = {x}},
       [&](const Scope& s, const ScanStep& t) -> ScanStepResult { return {.state = {layers::linear(s.scope("l"), t.x[0], 5)}}; });
  return g.error;
}
constexpr int kBodyLine = __LINE__ + 6;
constexpr Msg body_shape_error() {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 3});
  scan(g.scope("rnn"), {.init = {scan_zeros({Batch, 4})}, .xs = {x}},
       [&](const Scope&, const ScanStep& t) -> ScanStepResult {
         Value h = t.state[0] + t.x[0];
         return {.state = {h}};
       });
  return g.error;
}
constexpr Msg body_value_outside() {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 4});
  Value inside{};
  scan(g.scope("rnn"), {.init = {scan_zeros({Batch, 4})}, .xs = {x}}, [&](const Scope&, const ScanStep& t) -> ScanStepResult {
    inside = tanh(t.state[0] + t.x[0]);
    return {.state = {inside}};
  });
  g.loss(sum(inside));
  return g.error;
}
constexpr Msg bad_mask() {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 4});
  Value mask = g.input("mask", {Batch, SeqKV}, {.dtype = DType::index});
  scan(g.scope("rnn"), {.init = {scan_zeros({Batch, 4})}, .xs = {x}, .mask = mask},
       [&](const Scope&, const ScanStep& t) -> ScanStepResult { return {.state = {tanh(t.state[0] + t.x[0])}}; });
  return g.error;
}
constexpr Msg state_without_batch() {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 4});
  scan(g.scope("sum"), {.init = {scan_zeros({4})}, .xs = {x}},
       [&](const Scope&, const ScanStep& t) -> ScanStepResult { return {.state = {t.state[0] + sum(t.x[0], 0)}}; });
  return g.error;
}
constexpr Msg nested() {
  Builder g;
  Value x = g.input("x", {Batch, Seq, 4});
  scan(g.scope("outer"), {.init = {scan_zeros({Batch, 4})}, .xs = {x}}, [&](const Scope& s, const ScanStep& t) -> ScanStepResult {
    scan(s.scope("inner"), {.init = {scan_zeros({Batch, 4})}, .xs = {x}},
         [&](const Scope&, const ScanStep& u) -> ScanStepResult { return {.state = {tanh(u.state[0])}}; });
    return {.state = {tanh(t.state[0] + t.x[0])}};
  });
  return g.error;
}
bool has(const Msg& m, const std::string& part) { return std::string(m.view()).find(part) != std::string::npos; }
}  // namespace

TEST_CASE("scan: errors name the scan or the body's line", "[graph][scan][errors]") {
  constexpr Msg state = wrong_state_shape();
  INFO(state.view());
  CHECK(has(state, "scan in 'rnn': state 0: the body returns [Batch,5], the state is [Batch,4] (test_scan.cpp:" + std::to_string(kScanLine) + ")"));
  constexpr Msg body = body_shape_error();
  INFO(body.view());
  CHECK(has(body, "op add: cannot broadcast [Batch,4] with [Batch,3]"));
  CHECK(has(body, "(test_scan.cpp:" + std::to_string(kBodyLine) + ")"));
  constexpr Msg outside = body_value_outside();
  INFO(outside.view());
  CHECK(has(outside, "input 0 is a value inside a scan's body; return it from the body"));
  constexpr Msg mask = bad_mask();
  INFO(mask.view());
  CHECK(has(mask, "scan in 'rnn': the mask must be int32 [batch, L] = [Batch,Seq], got [Batch,SeqKV]"));
  constexpr Msg rows = state_without_batch();
  INFO(rows.view());
  CHECK(has(rows, "scan in 'sum': state 0 has shape [4]: a state is [batch, ...], its rows the sequences' (Batch)"));
  constexpr Msg inner = nested();
  INFO(inner.view());
  CHECK(has(inner, "scan in 'outer.inner': a scan inside a scan's body is not supported"));
}
