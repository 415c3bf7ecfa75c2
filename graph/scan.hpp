// Recurrence in the DSL: scan(s, inputs, body) applies a body over the L steps of sequences
// [Batch, L, ...], L a runtime dim (Seq, SeqKV, ...), carrying states from step to step:
//
//   ScanResult r = scan(g.scope("rnn"), {.init = {h0}, .xs = {x}, .mask = mask},
//       [&](const Scope& s, const ScanStep& t) -> ScanStepResult {   // t.state[0]: h at t - 1
//         Value h = tanh(linear(s.scope("cell"), t.x[0], 64) + linear(s.scope("rec"), t.state[0], 64));
//         return {.state = {h}, .out = {h}};                           // new states, step outputs
//       });
//   r.seq[0]: [Batch, L, 64] every step's output; r.last[0]: the final state [Batch, 64]
//
// The body is ordinary DSL code, built once: its ops, shape checks (naming the user's line),
// VJPs and memory plan are the graph's, and it may read any value of the graph (parameters,
// an encoder's output). Backward is backpropagation through time from the body's VJPs; the
// gradients of what the body reads are summed over the steps in a fixed order. Options:
//   mask      int32 [Batch, L]: a row whose mask is 0 at step t keeps its state and outputs
//             zeros there (padded sequences)
//   reverse   the last step first (the backward half of a bidirectional layer)
//   recompute keep only the states between forward and backward, and run each step's forward
//             again in backward (memory for time)
// A state starts from a value of the graph or from zeros (scan_zeros(shape)). States and step
// outputs are [batch, ...]: the body treats the rows (the sequences) apart.
#pragma once
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <ctgrad/graph/builder.hpp>

namespace ctgrad {

// The scan and the ops reading its results are run by the executor (graph/executor_scan.cpp),
// not through these kernels.
struct ScanOp {
  static constexpr const char* name = "scan";
  static constexpr int arity = -1;
  static constexpr ShapeResult shape(const ShapeCtx&) {
    ShapeResult r;
    r.shape = Shape{1};
    return r;
  }
  template <class T>
  static void forward(const OpArgs&) { throw std::logic_error("ctgrad: a scan runs in its executor"); }
  template <class T>
  static void vjp(const OpArgs&) { throw std::logic_error("ctgrad: a scan runs in its executor"); }
};

// A scan's result: attr w[0] the scan, w[1] 0 = a final state, 1 = a stacked step output, w[2] which.
struct ScanResultOp {
  static constexpr const char* name = "scan_result";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr ShapeResult shape(const ShapeCtx&) { return ShapeResult::fail("made by scan() only"); }
  template <class T>
  static void forward(const OpArgs&) { throw std::logic_error("ctgrad: a scan's result is written by its executor"); }
  template <class T>
  static void vjp(const OpArgs&) { throw std::logic_error("ctgrad: a scan's result is read by its executor"); }
};

// y = x: gives a body's result that is not an op's own value (a state passed through, a view)
// a buffer of its own for each step.
struct ScanCopyOp {
  static constexpr const char* name = "copy";
  static constexpr int arity = 1;
  static constexpr unsigned saves = 0;
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr ShapeResult shape(const ShapeCtx& c) {
    ShapeResult r;
    r.shape = c.in[0];
    r.dtype = c.dtype[0];
    return r;
  }
  template <class T>
  static void forward(const OpArgs& a) {
    const std::size_t bytes = std::size_t(a.out.numel) * (a.out.dtype == DType::index ? sizeof(std::int32_t) : sizeof(T));
    const auto* src = static_cast<const unsigned char*>(a.in[0].data);
    auto* dst = static_cast<unsigned char*>(a.out.data);
    std::copy(src, src + bytes, dst);
  }
  template <class T>
  static void vjp(const OpArgs& a) {
    const T* g = a.gout->as<T>();
    T* gx = a.gin[0].as<T>();
    if (a.assign(0))
      std::copy(g, g + a.out.numel, gx);
    else
      for (std::int64_t i = 0; i < a.out.numel; ++i) gx[i] += g[i];
  }
};

// A state's start: a value of the graph, or zeros of a shape (scan_zeros).
struct ScanInit {
  Value value{};
  Shape zeros{};
  bool is_zeros = false;
  constexpr ScanInit(Value v) : value(v) {}  // NOLINT: a value is a state's start
  constexpr ScanInit(Shape s, bool) : zeros(s), is_zeros(true) {}
};
constexpr ScanInit scan_zeros(Shape s) { return ScanInit(s, true); }

struct ScanInputs {
  std::vector<ScanInit> init;  // the states' starts [Batch, ...]
  std::vector<Value> xs;       // the sequences [Batch, L, ...] (axis 1 is scanned; the same L for all)
  std::optional<Value> mask;   // int32 [Batch, L]
  bool reverse = false;
  bool recompute = false;
};

// What the body sees at a step: the states so far, and its slice [Batch, ...] of each sequence.
struct ScanStep {
  std::vector<Value> state, x;
};
// What the body returns: the new states (the shapes of the old) and the step's outputs.
struct ScanStepResult {
  std::vector<Value> state, out;
};
// seq[k]: step output k of every step, [Batch, L, ...]; last[k]: state k after the last step.
struct ScanResult {
  std::vector<Value> seq, last;
};

namespace detail {
constexpr Node scan_node(NodeKind kind, const Shape& shape, DType dtype, int region) {
  Node n;
  n.kind = kind;
  n.shape = shape;
  n.dtype = dtype;
  n.region = std::uint8_t(region);
  return n;
}
}  // namespace detail

template <class Body>
constexpr ScanResult scan(const Scope& s, const ScanInputs& in, Body&& body, Loc loc = Loc::current()) {
  Builder& b = *s.b;
  loc = b.where(loc);
  auto fail = [&](Msg m) {
    Msg w("scan");
    if (!s.prefix.empty()) w.add(" in '").add(s.prefix).add("'");
    b.fail(w.add(": ").add(m), loc);
  };
  const int n_states = int(in.init.size()), n_xs = int(in.xs.size());
  const bool nested = b.region != 0;
  if (nested) fail("a scan inside a scan's body is not supported");
  if (n_xs == 0) fail("needs a sequence to scan (ScanInputs::xs)");
  if (n_states > kMaxScanValues || n_xs > kMaxScanValues)
    fail(Msg("at most ").add(kMaxScanValues).add(" states and ").add(kMaxScanValues).add(" sequences"));
  if (b.scans.size() >= 255) fail("at most 255 scans in a graph");
  auto valid = [&](Value v, const char* what) {
    if (!b.check_value(v, "scan", loc)) return false;
    if (b.nodes[std::size_t(v.id)].region != 0) {
      fail(Msg(what).add(" is a value inside a scan's body"));
      return false;
    }
    return true;
  };
  // The batch and length dims, from sequence 0.
  Dim batch = 1, len = 1;
  for (int k = 0; k < n_xs && k < kMaxScanValues; ++k) {
    if (!valid(in.xs[std::size_t(k)], "a sequence")) continue;
    const Shape x = in.xs[std::size_t(k)].shape();
    if (x.rank < 2) {
      fail(Msg("sequence ").add(k).add(" has shape ").add(x).add(": a sequence is [batch, L, ...]"));
      continue;
    }
    if (k == 0) batch = x[0], len = x[1];
    else if (!(x[0] == batch) || !(x[1] == len))
      fail(Msg("sequence ").add(k).add(" has shape ").add(x).add(", sequence 0 ").add(in.xs[0].shape()).add(": the same [batch, L] leads both"));
  }
  if (in.mask && valid(*in.mask, "the mask")) {
    const Shape m = in.mask->shape();
    if (in.mask->dtype() != DType::index || !(m == Shape{batch, len}))
      fail(Msg("the mask must be int32 [batch, L] = ").add(Shape{batch, len}).add(", got ").add(m).add(in.mask->dtype() == DType::index ? "" : " (real)"));
  }
  std::vector<Shape> state_shape;
  for (int k = 0; k < n_states && k < kMaxScanValues; ++k) {
    const ScanInit& i = in.init[std::size_t(k)];
    Shape sh = i.zeros;
    if (!i.is_zeros) {
      if (valid(i.value, "a state's start")) sh = i.value.shape();
      if (i.value.b == &b && i.value.dtype() != DType::real) fail(Msg("state ").add(k).add(": a state is real, its start is int32"));
    }
    if (sh.rank < 1 || !(sh[0] == batch))  // (rows carried apart under a mask, each row's gradient its own)
      fail(Msg("state ").add(k).add(" has shape ").add(sh).add(": a state is [batch, ...], its rows the sequences' (").add(batch).add(")"));
    state_shape.push_back(sh);
  }

  // The body: its inputs, then whatever it builds, all in the scan's region.
  ScanInfo info;
  const int scan_index = int(b.scans.size());
  info.region = nested ? b.region : scan_index + 1;
  info.body_begin = int(b.nodes.size());
  info.n_states = std::min(n_states, kMaxScanValues);
  info.n_xs = std::min(n_xs, kMaxScanValues);
  info.reverse = in.reverse;
  info.recompute = in.recompute;
  const int outer_region = b.region;
  b.region = info.region;
  ScanStep step;
  for (int k = 0; k < info.n_states; ++k) {
    b.add_node(detail::scan_node(NodeKind::carry, state_shape[std::size_t(k)], DType::real, info.region), s.prefix, loc);
    info.carry[std::size_t(k)] = int(b.nodes.size()) - 1;
    step.state.push_back(Value{&b, int(b.nodes.size()) - 1});
  }
  for (int k = 0; k < info.n_xs; ++k) {
    const Value x = in.xs[std::size_t(k)];
    Shape sh = x.b == &b ? x.shape() : Shape{};
    if (sh.rank >= 2) {
      for (int d = 1; d + 1 < sh.rank; ++d) sh[d] = sh[d + 1];
      sh[sh.rank - 1] = Dim(0);
      --sh.rank;
    }
    b.add_node(detail::scan_node(NodeKind::step, sh, x.b == &b ? x.dtype() : DType::real, info.region), s.prefix, loc);
    info.step[std::size_t(k)] = int(b.nodes.size()) - 1;
    step.x.push_back(Value{&b, int(b.nodes.size()) - 1});
  }
  const ScanStepResult r = body(s, std::as_const(step));

  // Each result a value of this body that owns its buffer (a copy of anything else).
  auto own = [&](Value v, const char* what, int k) -> Value {
    if (!b.check_value(v, "scan", loc)) return step.state.empty() ? step.x[0] : step.state[0];
    const Node& n = b.nodes[std::size_t(v.id)];
    if (n.region == info.region && n.kind == NodeKind::op && !n.op->view) return v;
    if (n.region != 0 && n.region != info.region) {
      fail(Msg(what).add(" ").add(k).add(" is a value of another scan's body"));
      return v;
    }
    return s.apply<ScanCopyOp>({v}, {}, loc);
  };
  if (int(r.state.size()) != n_states)
    fail(Msg("the body returns ").add(int(r.state.size())).add(" states, the scan carries ").add(n_states));
  if (int(r.out.size()) > kMaxScanValues) fail(Msg("the body returns more than ").add(kMaxScanValues).add(" step outputs"));
  for (int k = 0; k < info.n_states && k < int(r.state.size()); ++k) {
    const Value v = own(r.state[std::size_t(k)], "state", k);
    const Shape got = b.nodes[std::size_t(v.id)].shape;
    if (!(got == state_shape[std::size_t(k)]) || b.nodes[std::size_t(v.id)].dtype != DType::real)
      fail(Msg("state ").add(k).add(": the body returns ").add(got).add(", the state is ").add(state_shape[std::size_t(k)]));
    info.state_out[std::size_t(k)] = v.id;
  }
  info.n_outs = std::min(int(r.out.size()), kMaxScanValues);
  for (int k = 0; k < info.n_outs; ++k) info.out[std::size_t(k)] = own(r.out[std::size_t(k)], "step output", k).id;
  info.body_end = int(b.nodes.size());
  b.region = outer_region;

  // The scan op: the states' starts, the sequences, the mask, then what the body reads from outside.
  Node n;
  n.kind = NodeKind::op;
  n.op = &op_def<ScanOp>;
  n.shape = Shape{1};
  n.region = std::uint8_t(outer_region);
  auto push = [&](int id) {
    if (n.n_in < kMaxInputs) n.in[std::size_t(n.n_in)] = id;
    return n.n_in++;
  };
  for (int k = 0; k < info.n_states; ++k) {
    const ScanInit& i = in.init[std::size_t(k)];
    info.init_input[std::size_t(k)] = i.is_zeros || i.value.b != &b ? -1 : push(i.value.id);
  }
  for (int k = 0; k < info.n_xs; ++k) info.xs_input[std::size_t(k)] = push(in.xs[std::size_t(k)].b == &b ? in.xs[std::size_t(k)].id : 0);
  if (in.mask && in.mask->b == &b) info.mask_input = push(in.mask->id);
  info.first_capture = n.n_in;
  for (int i = info.body_begin; i < info.body_end; ++i) {
    const Node& bn = b.nodes[std::size_t(i)];
    if (bn.region != info.region) continue;
    for (int k = 0; k < bn.n_in; ++k) {
      const int o = bn.in[std::size_t(k)];
      if (b.nodes[std::size_t(o)].region == info.region) continue;
      bool seen = false;
      for (int c = info.first_capture; c < std::min(n.n_in, kMaxInputs); ++c) seen |= n.in[std::size_t(c)] == o;
      if (!seen) push(o);
    }
  }
  info.n_captures = n.n_in - info.first_capture;
  if (n.n_in > kMaxInputs)
    fail(Msg("its body reads ").add(info.n_captures).add(" values from outside it (parameters included): with its states, sequences and mask that is ")
             .add(n.n_in).add(" inputs, at most ").add(kMaxInputs));
  n.n_in = std::min(n.n_in, kMaxInputs);
  n.attr.w[0] = std::uint64_t(scan_index);
  n.attr.n = 1;
  b.add_node(n, s.prefix, loc);
  info.node = int(b.nodes.size()) - 1;

  // Its results: the final states, the stacked step outputs.
  ScanResult res;
  auto result = [&](int kind, int k, const Shape& shape, DType dtype) {
    Node o;
    o.kind = NodeKind::op;
    o.op = &op_def<ScanResultOp>;
    o.in[0] = info.node;
    o.n_in = 1;
    o.shape = shape;
    o.dtype = dtype;
    o.region = std::uint8_t(outer_region);
    o.attr.w[0] = std::uint64_t(scan_index), o.attr.w[1] = std::uint64_t(kind), o.attr.w[2] = std::uint64_t(k);
    o.attr.n = 3;
    b.add_node(o, s.prefix, loc);
    return Value{&b, int(b.nodes.size()) - 1};
  };
  for (int k = 0; k < info.n_states; ++k) {
    const Value v = result(0, k, state_shape[std::size_t(k)], DType::real);
    info.last[std::size_t(k)] = v.id;
    res.last.push_back(v);
  }
  for (int k = 0; k < info.n_outs; ++k) {
    const Node& o = b.nodes[std::size_t(info.out[std::size_t(k)])];
    Shape sh = o.shape;
    if (sh.rank < 1 || sh.rank >= kMaxRank || !(sh[0] == batch)) {
      fail(Msg("step output ").add(k).add(" has shape ").add(sh).add(": a step output is [batch, ...] (batch ").add(batch).add(") of rank below ").add(kMaxRank));
      sh = Shape{batch, len};
    } else {
      for (int d = sh.rank; d > 1; --d) sh[d] = sh[d - 1];
      sh[1] = len;
      ++sh.rank;
    }
    const Value v = result(1, k, sh, o.dtype);
    info.seq[std::size_t(k)] = v.id;
    res.seq.push_back(v);
  }
  if (!nested) b.scans.push_back(info);
  return res;
}

}  // namespace ctgrad
