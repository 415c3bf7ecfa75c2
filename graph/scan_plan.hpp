// A scan's body as a graph of its own, cut out of the model's graph at compile time, and its
// plans. In it, what the body reads from outside (parameters, the encoder's output) are
// parameter-like leaves: stored outside, their gradients summed into the model's; the states so
// far and the step slices are inputs; the new states and step outputs are its outputs, whose
// gradients the executor seeds at each step (a graph without a loss). make_plan then gives the
// body's schedules and buffers as for any graph; the executor lays the buffers that live from
// forward to backward out once per step (graph/executor_scan.cpp).
#pragma once
#include <ctgrad/graph/plan.hpp>

namespace ctgrad {
namespace detail {

// Which values a gradient can reach (make_plan's rule): parameters, inputs declared with one, and
// what differentiable ops compute from them. A body's states count as reached when anything
// entering the scan is.
template <class G>
constexpr auto outer_from_leaf(const G& g) {
  auto r = plan_array<bool, G::static_size>(g.size);
  for (int i = 0; i < g.size; ++i) {
    const Node& n = g[i];
    if (n.region != 0) continue;
    if (n.kind != NodeKind::op) r[std::size_t(i)] = n.requires_grad;
    else if (n.op->differentiable && n.dtype == DType::real)
      for (int k = 0; k < n.n_in; ++k) r[std::size_t(i)] = r[std::size_t(i)] || r[std::size_t(n.in[std::size_t(k)])];
  }
  return r;
}

template <class G>
constexpr int body_size(const G& g, int s) {
  const ScanInfo& sc = g.scans[std::size_t(s)];
  int n = sc.n_captures;
  for (int i = sc.body_begin; i < sc.body_end; ++i) n += g[i].region == sc.region;
  return n;
}

// The body's node table and, for each of its nodes, the model graph's node it stands for (NB nodes,
// or kRunTimeSize: a body cut out at run time).
template <int NB>
struct BodyTables {
  std::conditional_t<NB == kRunTimeSize, RuntimeGraph, Graph<NB, 0>> graph;
  PlanArray<int, NB> outer{};
};

template <int NB, class G>
constexpr BodyTables<NB> cut_body(const G& g, int s) {
  const ScanInfo& sc = g.scans[std::size_t(s)];
  BodyTables<NB> t;
  if constexpr (NB == kRunTimeSize) {
    const int nb = body_size(g, s);
    t.graph.size = nb;
    t.graph.nodes.resize(std::size_t(nb));
    t.outer = plan_array<int, NB>(nb);
  }
  const auto reached = outer_from_leaf(g);
  const Node& scan = g[sc.node];
  // Outer id -> body id, for the body's range and the captures.
  auto map = plan_array<int, G::static_size>(g.size);
  for (auto& m : map) m = -1;
  for (int c = 0; c < sc.n_captures; ++c) {
    const int o = scan.in[std::size_t(sc.first_capture + c)];
    map[std::size_t(o)] = c;
    Node n;
    n.kind = NodeKind::param;  // stored outside, its gradient the model's (no buffer in the body)
    n.shape = g[o].shape;
    n.dtype = g[o].dtype;
    n.requires_grad = reached[std::size_t(o)] && g[o].dtype == DType::real;
    n.name_off = g[o].name_off, n.name_len = g[o].name_len, n.line = g[o].line;
    n.file_off = g[o].file_off, n.file_len = g[o].file_len;
    t.graph.nodes[std::size_t(c)] = n;
    t.outer[std::size_t(c)] = o;
  }
  bool any_reached = false;  // does anything entering the scan need a gradient?
  for (int k = 0; k < scan.n_in; ++k) any_reached |= reached[std::size_t(scan.in[std::size_t(k)])];
  int next = sc.n_captures;
  for (int i = sc.body_begin; i < sc.body_end; ++i) {
    if (g[i].region != sc.region) continue;
    Node n = g[i];
    n.region = 0;
    if (n.kind == NodeKind::carry) {
      n.kind = NodeKind::input;
      n.requires_grad = any_reached;
    } else if (n.kind == NodeKind::step) {
      int k = 0;
      while (k < sc.n_xs && sc.step[std::size_t(k)] != i) ++k;
      const int xs = scan.in[std::size_t(sc.xs_input[std::size_t(k)])];
      n.kind = NodeKind::input;
      n.requires_grad = reached[std::size_t(xs)] && n.dtype == DType::real;
    }
    for (int k = 0; k < n.n_in; ++k) n.in[std::size_t(k)] = map[std::size_t(n.in[std::size_t(k)])];
    for (int k = 0; k < sc.n_states; ++k) n.is_output |= sc.state_out[std::size_t(k)] == i;
    for (int k = 0; k < sc.n_outs; ++k) n.is_output |= sc.out[std::size_t(k)] == i;
    map[std::size_t(i)] = next;
    t.graph.nodes[std::size_t(next)] = n;
    t.outer[std::size_t(next)] = i;
    ++next;
  }
  return t;
}

}  // namespace detail

// Scan S of graph G: its body's graph, the model's node each body node stands for, its plans.
template <const auto& G, int S>
struct ScanBodyOf {
  static constexpr int size = detail::body_size(G, S);
  static constexpr auto tables = detail::cut_body<size>(G, S);
  static constexpr auto train = make_plan(tables.graph, true);
  static constexpr auto infer = make_plan(tables.graph, false);
  static_assert(train.sound, "ctgrad: internal error: a scan body's memory plan reads a gradient before writing it");
};

}  // namespace ctgrad
