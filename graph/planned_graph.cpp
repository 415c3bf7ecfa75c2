#include <ctgrad/graph/planned_graph.hpp>

#include <stdexcept>

namespace ctgrad {

PlannedGraph::PlannedGraph(RuntimeGraph g) : g_(std::move(g)), train_(make_plan(g_, true)), infer_(make_plan(g_, false)) {
  if (!train_.sound) throw std::logic_error("ctgrad: internal error: the memory plan reads a gradient before writing it");
  for (int s = 0; s < g_.n_scans; ++s) {
    Body b{detail::cut_body<kRunTimeSize>(g_, s), Plan<kRunTimeSize>(), Plan<kRunTimeSize>()};
    b.train = make_plan(b.tables.graph, true);
    b.infer = make_plan(b.tables.graph, false);
    if (!b.train.sound) throw std::logic_error("ctgrad: internal error: a scan body's memory plan reads a gradient before writing it");
    bodies_.push_back(std::move(b));
  }
  for (int s = 0; s < g_.n_scans; ++s) {  // once bodies_ holds them all: the views point into it
    const Body& b = bodies_[std::size_t(s)];
    body_views_.push_back(BodyView{b.tables.graph.nodes.data(), b.tables.graph.size, b.tables.outer.data(), g_.scans[std::size_t(s)].n_captures,
                                   PlanView::of(b.train), PlanView::of(b.infer)});
  }
  for (const Node& n : g_.nodes) has_output_ = has_output_ || n.is_output;
}

GraphView PlannedGraph::view() const {
  return GraphView{g_.nodes.data(), g_.size, g_.names.data(), g_.loss, g_.derived.data(), g_.scans.data(), g_.n_scans, body_views_.data()};
}

}  // namespace ctgrad
