// Program<G>: forward, backward and a memory plan for a frozen graph G.
//
//   static constexpr auto G = ctgrad::freeze<my_model>();
//   ctgrad::Program<G> model(ctgrad::Options{.threads = 2, .seed = 1});
//   model.set_input("x", data, {batch, 64});
//   model.forward(); model.backward();
//
// The plans are computed at compile time from G; the executor underneath is shared by all graphs.
#pragma once
#include <utility>

#include <ctgrad/graph/executor.hpp>
#include <ctgrad/graph/scan_plan.hpp>

namespace ctgrad {

template <const auto& G>
struct PlansOf {
  static constexpr auto train = make_plan(G, true);
  static constexpr auto infer = make_plan(G, false);
  static_assert(train.sound, "ctgrad: internal error: the memory plan reads a gradient before writing it");
};

template <const auto& G, class Scans = std::make_integer_sequence<int, G.n_scans>>
struct BodiesOf;
template <const auto& G, int... S>
struct BodiesOf<G, std::integer_sequence<int, S...>> {
  static constexpr std::array<BodyView, sizeof...(S)> views{
      BodyView{ScanBodyOf<G, S>::tables.graph.nodes.data(), ScanBodyOf<G, S>::size, ScanBodyOf<G, S>::tables.outer.data(),
               G.scans[S].n_captures, PlanView::of(ScanBodyOf<G, S>::train), PlanView::of(ScanBodyOf<G, S>::infer)}...};
};

template <const auto& G, class T = float>
class Program : public Executor<T> {
  using Plans = PlansOf<G>;

 public:
  static constexpr const auto& graph = G;
  static constexpr const auto& train_plan = Plans::train;
  static constexpr const auto& infer_plan = Plans::infer;

  explicit Program(Options opts = {})
      : Executor<T>(GraphView{G.nodes.data(), G.size, G.names.data(), G.loss, G.derived.data(), G.scans.data(), G.n_scans,
                              BodiesOf<G>::views.data()},
                    PlanView::of(Plans::train), PlanView::of(Plans::infer), opts) {}

  void backward() {
    static_assert(G.loss >= 0 || has_output(), "ctgrad: backward() needs a graph with a loss or an output");
    Executor<T>::backward();
  }

 private:
  static constexpr bool has_output() {
    for (const Node& n : G.nodes)
      if (n.is_output) return true;
    return false;
  }
};

}  // namespace ctgrad
