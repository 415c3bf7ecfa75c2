// A graph frozen at run time (freeze(F()), graph/graph.hpp) with what Program<G> computes at compile
// time for a frozen graph G: its training and inference plans and its scans' bodies with theirs,
// in run-time storage, and the views the executor reads. Made once per model and shared by the
// programs that run it (a training program, its evaluators), which hold it alive.
#pragma once
#include <vector>

#include <ctgrad/graph/executor.hpp>
#include <ctgrad/graph/scan_plan.hpp>

namespace ctgrad {

class PlannedGraph {
 public:
  explicit PlannedGraph(RuntimeGraph g);
  PlannedGraph(const PlannedGraph&) = delete;  // the views point into it
  PlannedGraph& operator=(const PlannedGraph&) = delete;

  const RuntimeGraph& graph() const { return g_; }
  const Plan<kRunTimeSize>& train_plan() const { return train_; }
  const Plan<kRunTimeSize>& infer_plan() const { return infer_; }
  bool has_output() const { return has_output_; }
  GraphView view() const;
  // A scan's body (as ScanBodyOf<G, S> has it): its node table, outer ids and plans.
  struct Body {
    detail::BodyTables<kRunTimeSize> tables;
    Plan<kRunTimeSize> train, infer;
  };
  const std::vector<Body>& bodies() const { return bodies_; }

 private:
  RuntimeGraph g_;
  Plan<kRunTimeSize> train_, infer_;
  std::vector<Body> bodies_;
  std::vector<BodyView> body_views_;
  bool has_output_ = false;
};

}  // namespace ctgrad
