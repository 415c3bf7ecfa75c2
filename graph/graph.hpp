// A frozen graph: the Builder's node table copied into fixed-size arrays, so it can be a
// `static constexpr` object and a template argument (`template <const auto& G>`).
#pragma once
#include <ctgrad/graph/builder.hpp>

namespace ctgrad {

template <int N, int C, int S = 0>
struct Graph {
  static constexpr int size = N;
  static constexpr int n_scans = S;
  std::array<Node, static_cast<std::size_t>(N)> nodes{};
  std::array<char, static_cast<std::size_t>(C)> names{};
  int loss = -1;  // node index of the loss, -1 if the graph has none
  std::array<DerivedSymbol, kMaxSymbols> derived{};  // runtime symbols computed from others
  std::array<ScanInfo, static_cast<std::size_t>(S)> scans{};  // graph/scan.hpp

  constexpr const Node& operator[](int i) const { return nodes[static_cast<std::size_t>(i)]; }
  constexpr std::string_view str(int off, int len) const {
    return {names.data() + off, static_cast<std::size_t>(len)};
  }
  constexpr std::string_view name(int i) const { return str((*this)[i].name_off, (*this)[i].name_len); }
  constexpr std::string_view output_name(int i) const {
    return str((*this)[i].out_name_off, (*this)[i].out_name_len);
  }
  constexpr std::string_view file(int i) const { return str((*this)[i].file_off, (*this)[i].file_len); }
  constexpr int count(NodeKind k) const {
    int c = 0;
    for (const Node& n : nodes) c += n.kind == k;
    return c;
  }
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

// Runs the model function F at compile time and returns its frozen graph.
template <auto F>
consteval auto freeze() {
  constexpr detail::BuildInfo info = [] {
    Builder b = F();
    b.check_duplicates();
    if (b.region != 0 && b.error.empty()) b.error = Msg("a scan's body did not return (the model function left it)");
    return detail::BuildInfo{b.nodes.size(), b.names.size(), b.scans.size(), b.error};
  }();
  static_assert(ctgrad_graph_error<info.error>::ok);
  if constexpr (!info.error.empty()) {
    return Graph<0, 0>{};  // stop here: no follow-on errors after the first
  } else {
    Graph<int(info.nodes), int(info.chars), int(info.scans)> g;
    Builder b = F();
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

}  // namespace ctgrad
