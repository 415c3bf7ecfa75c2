// Program<G>: forward, backward and a memory plan for a frozen graph G.
//
//   static constexpr auto G = ctgrad::freeze<my_model>();
//   ctgrad::Program<G> model(ctgrad::Options{.threads = 2, .seed = 1});
//   model.set_input("x", data, {batch, 64});
//   model.forward(); model.backward();
//
// The plans are computed at compile time from G; the executor underneath is shared by all graphs.
// The same model function frozen at run time (a size or an architecture read from a config):
//
//   ctgrad::Program<ctgrad::run_time> model(ctgrad::freeze(my_model(config)), {.threads = 2});
//
// runs the same node table and the same plans (computed once, when it is made) on the same executor.
#pragma once
#include <memory>
#include <utility>

#include <ctgrad/graph/executor.hpp>
#include <ctgrad/graph/planned_graph.hpp>
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

// The graph argument of a Program whose graph is frozen at run time.
struct RunTime {};
inline constexpr RunTime run_time{};

template <class T>
class Program<run_time, T> : public Executor<T> {
 public:
  explicit Program(RuntimeGraph g, Options opts = {}) : Program(std::make_shared<const PlannedGraph>(std::move(g)), opts) {}
  // Another program of a planned graph (its plans made once, shared). The executor reads the tables
  // as it is made (`p` holds them meanwhile); the program then keeps them alive.
  explicit Program(std::shared_ptr<const PlannedGraph> p, Options opts = {})
      : Executor<T>(p->view(), PlanView::of(p->train_plan()), PlanView::of(p->infer_plan()), opts), planned(std::move(p)) {}

  const RuntimeGraph& graph() const { return planned->graph(); }
  const Plan<kRunTimeSize>& train_plan() const { return planned->train_plan(); }
  const Plan<kRunTimeSize>& infer_plan() const { return planned->infer_plan(); }
  const std::shared_ptr<const PlannedGraph>& planned_graph() const { return planned; }

  void backward() {
    if (planned->graph().loss < 0 && !planned->has_output()) throw graph_error("backward() needs a graph with a loss or an output");
    Executor<T>::backward();
  }

 private:
  std::shared_ptr<const PlannedGraph> planned;
};

}  // namespace ctgrad
