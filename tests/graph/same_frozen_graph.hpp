// The two ways to freeze a model function give the same tables: the node table freeze<F>() makes at
// compile time and the one freeze(F()) makes at run time, field by field; their plans, entry by
// entry; and each scan's body (ScanBodyOf against PlannedGraph::bodies). A difference is described
// ("node 12 (h.0.attn.qkv): shape ..."), so a failing test says where the two part.
#pragma once
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <utility>

#include <ctgrad/ctgrad.hpp>

namespace ctgrad::testing {

inline std::string node_difference(const Node& x, const Node& y) {
  auto same_real = [](const Real& a, const Real& b) { return std::memcmp(&a.value, &b.value, sizeof a.value) == 0 && a.hyper == b.hyper; };
  if (x.kind != y.kind) return "kind";
  if (x.op != y.op) return "op";
  if (x.n_in != y.n_in) return "input count";
  for (int k = 0; k < x.n_in; ++k)
    if (x.in[std::size_t(k)] != y.in[std::size_t(k)]) return "input " + std::to_string(k);
  if (!(x.shape == y.shape)) return "shape";
  if (x.dtype != y.dtype) return "dtype";
  if (!(x.scratch == y.scratch)) return "scratch";
  if (x.attr.w != y.attr.w || x.attr.real_at != y.attr.real_at || x.attr.n != y.attr.n || x.attr.overflow != y.attr.overflow) return "attributes";
  if (x.init.kind != y.init.kind || !same_real(x.init.a, y.init.a) || !same_real(x.init.b, y.init.b) ||
      std::memcmp(&x.init.scale, &y.init.scale, sizeof(double)) != 0)
    return "init";
  if (x.requires_grad != y.requires_grad || x.is_output != y.is_output || x.is_loss != y.is_loss) return "flags";
  if (x.region != y.region) return "region";
  if (x.name_off != y.name_off || x.name_len != y.name_len || x.out_name_off != y.out_name_off || x.out_name_len != y.out_name_len)
    return "name";
  if (x.line != y.line || x.file_off != y.file_off || x.file_len != y.file_len) return "source line";
  return "";
}

inline std::string scan_difference(const ScanInfo& a, const ScanInfo& b) {
  const bool same = a.node == b.node && a.region == b.region && a.body_begin == b.body_begin && a.body_end == b.body_end &&
                    a.n_states == b.n_states && a.n_xs == b.n_xs && a.n_outs == b.n_outs && a.reverse == b.reverse &&
                    a.recompute == b.recompute && a.mask_input == b.mask_input && a.first_capture == b.first_capture &&
                    a.n_captures == b.n_captures && a.carry == b.carry && a.state_out == b.state_out && a.init_input == b.init_input &&
                    a.last == b.last && a.step == b.step && a.xs_input == b.xs_input && a.out == b.out && a.seq == b.seq;
  return same ? "" : "scan record";
}

// "" when equal; else the first difference. `names`: whether both have a name pool (a scan
// body's table has none: its nodes name into the model's).
template <class A, class B>
std::string graph_difference(const A& a, const B& b, bool names = true) {
  if (a.size != b.size) return "node count " + std::to_string(a.size) + " against " + std::to_string(b.size);
  for (int i = 0; i < a.size; ++i)
    if (const std::string d = node_difference(a[i], b[i]); !d.empty())
      return "node " + std::to_string(i) + (names ? " (" + std::string(a.name(i)) + ")" : "") + ": " + d;
  if (names && (a.names.size() != b.names.size() || !std::equal(a.names.begin(), a.names.end(), b.names.begin()))) return "name pool";
  if (a.loss != b.loss) return "loss node";
  for (std::size_t s = 0; s < a.derived.size(); ++s)
    if (!(a.derived[s].of == b.derived[s].of) || a.derived[s].factor != b.derived[s].factor) return "derived symbol " + std::to_string(s);
  if (a.n_scans != b.n_scans) return "scan count";
  for (int s = 0; s < a.n_scans; ++s)
    if (const std::string d = scan_difference(a.scans[std::size_t(s)], b.scans[std::size_t(s)]); !d.empty()) return "scan " + std::to_string(s) + ": " + d;
  return "";
}

template <class TA, class TB>
bool same_table(const TA& a, const TB& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if constexpr (std::is_same_v<std::decay_t<decltype(a[i])>, Buffer>) {
      const Buffer &x = a[i], &y = b[i];
      if (x.kind != y.kind || x.node != y.node || x.start != y.start || x.end != y.end || !(x.elems == y.elems) || x.dtype != y.dtype ||
          x.slot != y.slot)
        return false;
    } else if (!(a[i] == b[i])) {
      return false;
    }
  return true;
}

template <class PA, class PB>
std::string plan_difference(const PA& a, const PB& b) {
  if (a.training != b.training || a.sound != b.sound) return "training or soundness";
  if (a.n_fwd != b.n_fwd || a.n_bwd != b.n_bwd) return "step counts";
  if (a.n_buffers != b.n_buffers || a.n_slots != b.n_slots) return "buffer or slot counts";
#define CTGRAD_SAME(field) \
  if (!same_table(a.field, b.field)) return #field;
  CTGRAD_SAME(fwd_order) CTGRAD_SAME(bwd_order) CTGRAD_SAME(fwd_begin) CTGRAD_SAME(bwd_begin) CTGRAD_SAME(fwd_step) CTGRAD_SAME(bwd_step)
  CTGRAD_SAME(needs_grad) CTGRAD_SAME(runs_vjp) CTGRAD_SAME(zero_order) CTGRAD_SAME(zero_begin) CTGRAD_SAME(grad_fresh) CTGRAD_SAME(assigns)
  CTGRAD_SAME(buffers) CTGRAD_SAME(value_buf) CTGRAD_SAME(grad_buf) CTGRAD_SAME(scratch_buf) CTGRAD_SAME(view_of) CTGRAD_SAME(grad_view_of)
  CTGRAD_SAME(vjp_skip) CTGRAD_SAME(in_place_of)
#undef CTGRAD_SAME
  return "";
}

// G = freeze<F, A...>(): F(A...) frozen at run time gives the same graph, plans and scan bodies.
template <const auto& G, auto F, auto... A>
void require_same_frozen_graph(const char* what) {
  INFO(what);
  const PlannedGraph p(freeze(F(A...)));
  CHECK(graph_difference(G, p.graph()) == "");
  CHECK(plan_difference(PlansOf<G>::train, p.train_plan()) == "");
  CHECK(plan_difference(PlansOf<G>::infer, p.infer_plan()) == "");
  REQUIRE(int(p.bodies().size()) == G.n_scans);
  auto body = [&]<int S>(std::integral_constant<int, S>) {
    INFO("scan " << S);
    CHECK(graph_difference(ScanBodyOf<G, S>::tables.graph, p.bodies()[S].tables.graph, false) == "");
    CHECK(same_table(ScanBodyOf<G, S>::tables.outer, p.bodies()[S].tables.outer));
    CHECK(plan_difference(ScanBodyOf<G, S>::train, p.bodies()[S].train) == "");
    CHECK(plan_difference(ScanBodyOf<G, S>::infer, p.bodies()[S].infer) == "");
  };
  [&]<int... S>(std::integer_sequence<int, S...>) { (body(std::integral_constant<int, S>{}), ...); }(std::make_integer_sequence<int, G.n_scans>{});
}

// Two programs of one model, one frozen each way, made with the same options: the same initial
// weights, and after `steps` training steps on what `feed` gives them, the same loss and gradients,
// bit for bit (the weights moved by plain gradient descent between steps).
template <class A, class B, class Feed>
void require_same_bits(A& a, B& b, Feed feed, int steps = 3) {
  auto same = [](const auto& x, const auto& y) { return x.numel == y.numel && std::memcmp(x.data, y.data, sizeof(float) * std::size_t(x.numel)) == 0; };
  REQUIRE(a.parameters().size() == b.parameters().size());
  for (std::size_t i = 0; i < a.parameters().size(); ++i) {
    INFO(a.parameters()[i].name);
    CHECK(a.parameters()[i].name == b.parameters()[i].name);
    CHECK(same(a.parameters()[i].value, b.parameters()[i].value));
  }
  for (int step = 0; step < steps; ++step) {
    INFO("step " << step);
    feed(a, step), feed(b, step);
    a.zero_grad(), b.zero_grad();
    a.forward(), b.forward();
    a.backward(), b.backward();
    CHECK(same(a.output("loss"), b.output("loss")));
    for (std::size_t i = 0; i < a.parameters().size(); ++i) {
      auto pa = a.parameters()[i], pb = b.parameters()[i];
      INFO(pa.name);
      CHECK(same(pa.grad, pb.grad));
      for (std::int64_t k = 0; k < pa.value.numel; ++k) pa.value.data[k] -= 0.1f * pa.grad.data[k], pb.value.data[k] -= 0.1f * pb.grad.data[k];
    }
  }
}

}  // namespace ctgrad::testing
