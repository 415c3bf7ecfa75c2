// A frozen graph: the Builder's node table, frozen in one of two ways from the same model function.
//   freeze<F>()   at compile time: fixed-size arrays, so it can be a `static constexpr` object and
//                 a template argument (`template <const auto& G>`, Program<G>); a shape error
//                 stops compilation naming the user's line.
//   freeze(F(c))  at run time (F a function of a config read at run time): the same node table
//                 in vectors (RuntimeGraph, Program<run_time>); a shape error is a graph_error
//                 carrying the same one-line message and the user's file:line.
#pragma once
#include <stdexcept>
#include <string>
#include <type_traits>

#include <ctgrad/graph/builder.hpp>

namespace ctgrad {

// The size of a graph frozen at run time, in place of Graph's N (graph/plan.hpp sizes its tables by it).
inline constexpr int kRunTimeSize = -1;

// What both kinds of frozen graph answer, from their nodes and name pool.
template <class G>
struct GraphTables {
  constexpr const Node& operator[](int i) const { return self().nodes[static_cast<std::size_t>(i)]; }
  constexpr std::string_view str(int off, int len) const { return {self().names.data() + off, static_cast<std::size_t>(len)}; }
  constexpr std::string_view name(int i) const { return str((*this)[i].name_off, (*this)[i].name_len); }
  constexpr std::string_view output_name(int i) const { return str((*this)[i].out_name_off, (*this)[i].out_name_len); }
  constexpr std::string_view file(int i) const { return str((*this)[i].file_off, (*this)[i].file_len); }
  constexpr int count(NodeKind k) const {
    int c = 0;
    for (const Node& n : self().nodes) c += n.kind == k;
    return c;
  }

 private:
  constexpr const G& self() const { return static_cast<const G&>(*this); }
};

template <int N, int C, int S = 0>
struct Graph : GraphTables<Graph<N, C, S>> {
  static constexpr int size = N;
  static constexpr int static_size = N;
  static constexpr int n_scans = S;
  std::array<Node, static_cast<std::size_t>(N)> nodes{};
  std::array<char, static_cast<std::size_t>(C)> names{};
  int loss = -1;  // node index of the loss, -1 if the graph has none
  std::array<DerivedSymbol, kMaxSymbols> derived{};  // runtime symbols computed from others
  std::array<ScanInfo, static_cast<std::size_t>(S)> scans{};  // graph/scan.hpp
};

// The same table frozen at run time.
struct RuntimeGraph : GraphTables<RuntimeGraph> {
  static constexpr int static_size = kRunTimeSize;
  int size = 0, n_scans = 0;
  std::vector<Node> nodes;
  std::vector<char> names;
  int loss = -1;
  std::array<DerivedSymbol, kMaxSymbols> derived{};
  std::vector<ScanInfo> scans;
};

// The compile error for a graph that failed a check: the message is in the first line, e.g.
//   In instantiation of 'struct ctgrad::ctgrad_graph_error<ctgrad::Msg{"op matmul in 'enc.0.ff':
//   inner dims differ: [Batch,Seq,512] x [256,2048] (model.cpp:17)", ...}>'
template <Msg M>
struct ctgrad_graph_error {
  static_assert(M.empty(), "ctgrad: the graph failed its compile-time check (message above)");
  static constexpr bool ok = true;
};

namespace detail {
struct BuildInfo {
  std::size_t nodes, chars, scans;
  Msg error;
};
}  // namespace detail

namespace detail {
// The checks that run once the model function has returned.
constexpr void finish(Builder& b) {
  b.check_duplicates();
  if (b.region != 0 && b.error.empty()) b.error = Msg("a scan's body did not return (the model function left it)");
}
}  // namespace detail

// Runs the model function F at compile time (on A..., a config: freeze<models::gpt, kGptSmall>())
// and returns its frozen graph.
template <auto F, auto... A>
consteval auto freeze() {
  constexpr detail::BuildInfo info = [] {
    Builder b = F(A...);
    detail::finish(b);
    return detail::BuildInfo{b.nodes.size(), b.names.size(), b.scans.size(), b.error};
  }();
  static_assert(ctgrad_graph_error<info.error>::ok);
  if constexpr (!info.error.empty()) {
    return Graph<0, 0>{};  // stop here: no follow-on errors after the first
  } else {
    Graph<int(info.nodes), int(info.chars), int(info.scans)> g;
    Builder b = F(A...);
    for (std::size_t i = 0; i < info.nodes; ++i) {
      g.nodes[i] = b.nodes[i];
      if (g.nodes[i].is_loss) g.loss = int(i);
    }
    for (std::size_t i = 0; i < info.chars; ++i) g.names[i] = b.names[i];
    g.derived = b.derived;
    for (std::size_t i = 0; i < info.scans; ++i) g.scans[i] = b.scans[i];
    return g;
  }
}

// Freezes, at run time, the graph a model function built: the node table freeze<F>() makes of the
// same function. A shape error is a graph_error with the message freeze<F>() stops compilation with
// (the first error: at run time the Builder throws it where it is found).
inline RuntimeGraph freeze(const Builder& built) {
  Builder b = built;
  detail::finish(b);
  if (!b.error.empty()) throw graph_error(std::string(b.error.view()));
  RuntimeGraph g;
  g.size = int(b.nodes.size()), g.n_scans = int(b.scans.size());
  g.nodes = b.nodes, g.names = b.names, g.derived = b.derived, g.scans = b.scans;
  for (int i = 0; i < g.size; ++i)
    if (g.nodes[std::size_t(i)].is_loss) g.loss = i;
  return g;
}

}  // namespace ctgrad
