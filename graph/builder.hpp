// The graph builder: ordinary constexpr C++ that records a topologically ordered SSA node table.
// A model function creates a Builder, declares inputs and parameters, applies ops and returns the
// Builder; ctgrad::freeze<F>() runs it at compile time and turns it into a fixed-size Graph.
// Nothing here allocates at run time: the std::vector/std::string live only during constant
// evaluation.
#pragma once
#include <algorithm>
#include <bit>
#include <source_location>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <string_view>
#include <vector>

#include <ctgrad/graph/dim.hpp>
#include <ctgrad/graph/op.hpp>
#include <ctgrad/graph/scan_info.hpp>

namespace ctgrad {

using Loc = std::source_location;

// carry and step: the inputs of a scan's body (graph/scan.hpp), its state at the step and its
// step's slice of a scanned sequence.
enum class NodeKind : std::uint8_t { op, input, param, hyper, carry, step };

// How a parameter is initialised. Reproducible: the value of element k depends only on
// (seed, parameter name, k), not on order, threads or the other parameters. The numbers may be
// hyperparameters (an init scale set from a config); `scale` multiplies a and b (GPT-2 scales
// its residual projections by 1/sqrt(2 layers)).
struct Init {
  enum Kind : std::uint8_t { zeros, ones, constant, normal, uniform, xavier_uniform, truncated_normal } kind = zeros;
  Real a = 0, b = 0;
  double scale = 1;
  constexpr Init scaled(double f) const {
    Init i = *this;
    i.scale *= f;
    return i;
  }
};
namespace init {
constexpr Init zeros() { return {Init::zeros}; }
constexpr Init ones() { return {Init::ones}; }
constexpr Init constant(Real c) { return {Init::constant, c}; }
constexpr Init normal(Real stddev) { return {Init::normal, stddev}; }
// N(0, stddev) redrawn outside +-2 stddev (TensorFlow's truncated_normal: BERT's initialiser).
constexpr Init truncated_normal(Real stddev) { return {Init::truncated_normal, stddev}; }
constexpr Init uniform(Real lo, Real hi) { return {Init::uniform, lo, hi}; }
// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)); fans from the last two dims.
constexpr Init xavier_uniform(Real gain = 1.0) { return {Init::xavier_uniform, gain}; }
}  // namespace init

// Options of an input value.
struct In {
  DType dtype = DType::real;
  bool grad = false;  // keep a gradient for it (for gradcheck, saliency, ...)
};

// A model's input, named once: a model header declares each of its inputs as one of these, and
// the graph (Scope::input), the apps, the benchmarks and the tests use the constant, so a typo is a
// compile error and the dtype travels with the name. Converts to the name for Program::set_input.
struct InputName {
  std::string_view name;
  DType dtype = DType::real;
  constexpr operator std::string_view() const { return name; }  // NOLINT
};

struct Node {
  NodeKind kind = NodeKind::op;
  const OpDef* op = nullptr;  // kind == op
  std::array<int, kMaxInputs> in{};
  int n_in = 0;
  Shape shape;
  DType dtype = DType::real;
  Dim scratch = 0;
  AttrWords attr;  // an op's options (graph/attrs.hpp); a hyperparameter's default value in w[0]
  Init init;
  bool requires_grad = false;  // inputs marked In{.grad=true}; parameters always
  bool is_output = false;
  bool is_loss = false;
  std::uint8_t region = 0;  // 0: the graph; r: the body of scan r - 1 (graph/scan.hpp)
  int name_off = 0, name_len = 0;  // scope/parameter/input name, in the graph's name pool
  int out_name_off = 0, out_name_len = 0;
  int line = 0;
  int file_off = 0, file_len = 0;

  // A hyperparameter node's default value (kind == hyper).
  constexpr double hyper_default() const { return std::bit_cast<double>(attr.w[0]); }
};

struct Builder;

// A model that failed a check of the DSL, built at run time (freeze(F()), graph/graph.hpp): the
// one-line message freeze<F>() stops compilation with, the user's file:line at its end.
struct graph_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A handle to a node while the graph is built.
struct Value {
  Builder* b = nullptr;
  int id = -1;
  constexpr Shape shape() const;  // by value: the node table grows while a model is built
  constexpr DType dtype() const;
};

// Sets the builder's location for the ops a layer function creates, so that their errors name
// the user's line (where the layer was called), not the layer's header. The outermost wins.
class LocationGuard {
 public:
  constexpr LocationGuard(Builder* b, const Loc& loc);
  constexpr ~LocationGuard();
  LocationGuard(const LocationGuard&) = delete;
  LocationGuard& operator=(const LocationGuard&) = delete;

 private:
  Builder* b_;
  bool set_;
};

// A naming scope: parameters and ops created through it are named "<prefix>.<name>". It records
// where it was made (`loc`): a layer function given a scope reports errors at that line.
struct Scope {
  Builder* b = nullptr;
  std::string prefix;
  Loc loc = Loc::current();

  constexpr Scope scope(std::string_view name, Loc at = Loc::current()) const { return {b, join(name), at}; }
  constexpr Scope scope(std::string_view name, int index, Loc at = Loc::current()) const {
    std::string s(name);
    s += '.';
    s += digits(index);
    return {b, join(s), at};
  }
  // For the body of a layer function: its ops and parameters report errors at this scope's line.
  constexpr LocationGuard enter() const { return {b, loc}; }

  constexpr Value input(std::string_view name, Shape shape, In opts = {},
                        Loc loc = Loc::current()) const;
  constexpr Value input(InputName in, Shape shape, Loc loc = Loc::current()) const {
    return input(in.name, shape, In{.dtype = in.dtype}, loc);
  }

  constexpr Value param(std::string_view name, Shape shape, Init init,
                        Loc loc = Loc::current()) const;
  // A named runtime hyperparameter (dropout, label smoothing, an init scale, ...) with its default:
  // pass it wherever an option takes a Real; Program::set_hyper(name, v) changes it between steps,
  // and the ops using it check the new value with their shape rules. Asking twice for one name
  // gives the same hyperparameter.
  constexpr Real hyper(std::string_view name, double value, Loc loc = Loc::current()) const;
  template <OpType Op>
  constexpr Value apply(std::initializer_list<Value> inputs, const options_t<Op>& options = {},
                        Loc loc = Loc::current()) const;

  constexpr std::string join(std::string_view name) const {
    if (prefix.empty()) return std::string(name);
    std::string s = prefix;
    s += '.';
    s += name;
    return s;
  }
  static constexpr std::string digits(int v) {
    std::string s;
    if (v == 0) return "0";
    while (v > 0) {
      s.insert(s.begin(), char('0' + v % 10));
      v /= 10;
    }
    return s;
  }
};

struct Builder : Scope {
  std::vector<Node> nodes;
  std::vector<char> names;
  Msg error;  // the first problem found; freeze() turns it into a compile error
  // For duplicate checks and file names: kept cheap, since compile time is a feature.
  struct Leaf {
    std::uint64_t hash;
    int node;
  };
  std::vector<Leaf> leaves;  // parameters and inputs
  std::vector<int> files;    // nodes whose file_off/file_len name each distinct file

  std::vector<int> hypers;    // hyperparameter nodes
  Loc user_loc;               // set by a LocationGuard: where the layer being built was called
  bool has_user_loc = false;
  std::array<DerivedSymbol, kMaxSymbols> derived{};  // symbols computed from others (derive)
  std::vector<ScanInfo> scans;  // graph/scan.hpp
  int region = 0;               // the scan body being built (Node::region), 0 outside any

  constexpr Builder(Loc at = Loc::current()) : Scope{this, {}, at} {}
  constexpr Builder(const Builder& o)
      : Scope{this, o.prefix, o.loc}, nodes(o.nodes), names(o.names), error(o.error), leaves(o.leaves), files(o.files),
        hypers(o.hypers), user_loc(o.user_loc), has_user_loc(o.has_user_loc), derived(o.derived), scans(o.scans),
        region(o.region) {}
  // The location an op or parameter reports: the active layer call's, else its own.
  constexpr const Loc& where(const Loc& own) const { return has_user_loc ? user_loc : own; }
  constexpr Builder& operator=(const Builder&) = delete;

  // Declares a runtime symbol whose value is computed, not read from an input: max(1, ceil(of *
  // factor)) once the inputs bind `of`'s symbols. E.g. the rows an expert takes at capacity factor
  // 1.25 over 4 experts:  const Dim cap = g.derive(Sym3, Batch * Seq, 1.25 / 4);
  constexpr Dim derive(Dim sym, Dim of, double factor, Loc loc = Loc::current()) {
    int id = -1;
    for (int s = 0; s < kMaxSymbols; ++s)
      if (sym == symbol(s)) id = s;
    if (id < 0) fail(Msg("derive: ").add(sym).add(" is not a runtime symbol (Sym3, Sym4, ...)"), where(loc));
    else if (derived[std::size_t(id)].active()) {
      const DerivedSymbol& d = derived[std::size_t(id)];
      if (!(d.of == of) || d.factor != factor) fail(Msg("derive: ").add(sym).add(" is derived twice, by different rules"), where(loc));
      return sym;  // (every layer of a stack may declare its own: the same rule)
    }
    else if (!(factor > 0) || factor > 1e12) fail(Msg("derive: the factor of ").add(sym).add(" must be positive and finite"), where(loc));
    else
      for (int s = 0; s < kMaxSymbols; ++s)
        if (of.exp[std::size_t(s)] && (s == id || derived[std::size_t(s)].active())) {
          fail(Msg("derive: ").add(sym).add(" from ").add(of).add(": a derived symbol comes from symbols the inputs bind"), where(loc));
          return sym;
        }
    if (error.empty()) derived[std::size_t(id)] = {of, factor};
    return sym;
  }

  // Marks v as a named output, readable after forward().
  constexpr Builder& output(Value v, std::string_view name = "out", Loc loc = Loc::current()) {
    if (!check_value(v, "output", loc) || !check_outside_scan(v, "output", loc)) return *this;
    Node& n = nodes[static_cast<std::size_t>(v.id)];
    if (n.is_output) fail(Msg("output '").add(name).add("': this value is already an output"), loc);
    n.is_output = true;
    n.out_name_off = store(name);
    n.out_name_len = int(name.size());
    return *this;
  }
  // Marks v as the scalar that backward() differentiates.
  constexpr Builder& loss(Value v, Loc loc = Loc::current()) {
    if (!check_value(v, "loss", loc) || !check_outside_scan(v, "loss", loc)) return *this;
    for (const Node& n : nodes)
      if (n.is_loss) fail(Msg("loss: the graph already has a loss"), loc);
    Node& n = nodes[static_cast<std::size_t>(v.id)];
    if (n.shape.rank != 0 || n.dtype != DType::real)
      fail(Msg("loss: must be a real scalar (rank 0), got shape ").add(n.shape), loc);
    n.is_loss = true;
    if (!n.is_output) output(v, "loss", loc);
    return *this;
  }

  // The first error wins. At compile time it is recorded (freeze<F>() reports it once the model
  // function returns); at run time it is thrown at once, so nothing is built on a broken value.
  constexpr void fail(Msg m, const Loc& loc) {
    if (!error.empty()) return;
    error = m;
    error.add(" (").add(basename(loc.file_name())).add(":").add(int(loc.line())).add(")");
    if (!std::is_constant_evaluated()) throw graph_error(std::string(error.view()));
  }
  constexpr bool check_value(Value v, const char* what, const Loc& loc) {
    if (v.b != this || v.id < 0 || v.id >= int(nodes.size())) {
      fail(Msg(what).add(": value does not belong to this graph"), loc);
      return false;
    }
    return true;
  }
  // A value of a scan's body is seen outside it only through the scan's results.
  constexpr bool check_outside_scan(Value v, const char* what, const Loc& loc) {
    if (nodes[static_cast<std::size_t>(v.id)].region == 0) return true;
    fail(Msg(what).add(": the value is inside a scan's body; return it from the body (ScanStepResult) and use the scan's result"), loc);
    return false;
  }
  constexpr int store(std::string_view s) {
    int off = int(names.size());
    names.insert(names.end(), s.begin(), s.end());
    return off;
  }
  static constexpr std::uint64_t hash(std::string_view s) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    return h;
  }
  // Records a parameter or input for the duplicate-name check that freeze() runs once, sorted:
  // a check here per leaf would be quadratic, and compile time is a feature.
  constexpr void add_leaf(std::string_view name, int node) { leaves.push_back({hash(name), node}); }
  constexpr void check_duplicates() {
    if (!error.empty()) return;
    auto kind_of = [&](const Leaf& l) { return int(nodes[static_cast<std::size_t>(l.node)].kind); };
    std::sort(leaves.begin(), leaves.end(), [&](const Leaf& a, const Leaf& b) {
      if (a.hash != b.hash) return a.hash < b.hash;
      if (kind_of(a) != kind_of(b)) return kind_of(a) < kind_of(b);
      return a.node < b.node;
    });
    for (std::size_t i = 1; i < leaves.size(); ++i) {
      const Node& n = nodes[static_cast<std::size_t>(leaves[i].node)];
      if (leaves[i].hash != leaves[i - 1].hash || kind_of(leaves[i]) != kind_of(leaves[i - 1]) ||
          name_of(leaves[i - 1].node) != name_of(leaves[i].node))
        continue;
      error = Msg(n.kind == NodeKind::param ? "parameter '" : "input '");
      error.add(name_of(leaves[i].node)).add("' is declared twice (");
      error.add(std::string_view(names.data() + n.file_off, static_cast<std::size_t>(n.file_len))).add(":").add(n.line).add(")");
      return;
    }
    // Runtime symbols come from the inputs: one that only an op's shape names (a tensor-creating
    // op given Sym3, say) could never be bound.
    std::array<bool, kMaxSymbols> bound{};
    for (const Node& n : nodes)
      if (n.kind == NodeKind::input)
        for (int d = 0; d < n.shape.rank; ++d)
          for (int s = 0; s < kMaxSymbols; ++s) {
            bound[std::size_t(s)] |= n.shape[d] == symbol(s);
            if (n.shape[d].exp[std::size_t(s)] && derived[std::size_t(s)].active()) {
              error = Msg("input '").add(name_of(int(&n - nodes.data()))).add("': its shape ").add(n.shape).add(" uses ")
                          .add(kSymbolNames[std::size_t(s)]).add(", which is derived (Builder::derive), not an input's");
              return;
            }
          }
    for (int s = 0; s < kMaxSymbols; ++s) {
      const DerivedSymbol& ds = derived[std::size_t(s)];
      if (!ds.active()) continue;
      for (int t = 0; t < kMaxSymbols; ++t)
        if (ds.of.exp[std::size_t(t)] && !bound[std::size_t(t)]) {
          error = Msg("derive: ").add(kSymbolNames[std::size_t(s)]).add(" comes from ").add(ds.of).add(", but no input carries ")
                      .add(kSymbolNames[std::size_t(t)]).add(" as a dim");
          return;
        }
      bound[std::size_t(s)] = true;
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      if (n.kind != NodeKind::op) continue;
      for (int d = 0; d < n.shape.rank; ++d)
        for (int s = 0; s < kMaxSymbols; ++s)
          if (n.shape[d].exp[std::size_t(s)] && !bound[std::size_t(s)]) {
            error = Msg("op ").add(n.op->name).add(": its shape ").add(n.shape).add(" uses ").add(kSymbolNames[std::size_t(s)])
                        .add(", which no input carries as a dim (");
            error.add(std::string_view(names.data() + n.file_off, static_cast<std::size_t>(n.file_len))).add(":").add(n.line).add(")");
            return;
          }
    }
    // Output names: few, so a plain pairwise check.
    std::vector<int> outs;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i].is_output) outs.push_back(int(i));
    for (std::size_t a = 0; a < outs.size(); ++a)
      for (std::size_t b = a + 1; b < outs.size(); ++b)
        if (out_name_of(outs[a]) == out_name_of(outs[b])) {
          error = Msg("output '").add(out_name_of(outs[b])).add("' is declared twice");
          return;
        }
  }
  constexpr std::string_view out_name_of(int id) const {
    const Node& n = nodes[static_cast<std::size_t>(id)];
    return {names.data() + n.out_name_off, static_cast<std::size_t>(n.out_name_len)};
  }
  constexpr std::string_view name_of(int id) const {
    const Node& n = nodes[static_cast<std::size_t>(id)];
    return {names.data() + n.name_off, static_cast<std::size_t>(n.name_len)};
  }
  static constexpr std::string_view basename(std::string_view f) {
    auto p = f.find_last_of('/');
    return p == std::string_view::npos ? f : f.substr(p + 1);
  }
  constexpr Node& add_node(Node n, std::string_view name, const Loc& loc) {
    n.name_off = store(name);
    n.name_len = int(name.size());
    n.line = int(loc.line());
    std::string_view file = basename(loc.file_name());
    n.file_off = -1;
    for (int f : files) {
      const Node& o = nodes[static_cast<std::size_t>(f)];
      if (std::string_view(names.data() + o.file_off, static_cast<std::size_t>(o.file_len)) == file) {
        n.file_off = o.file_off;
        break;
      }
    }
    if (n.file_off < 0) {
      n.file_off = store(file);
      files.push_back(int(nodes.size()));
    }
    n.file_len = int(file.size());
    nodes.push_back(n);
    return nodes.back();
  }
};

constexpr Shape Value::shape() const { return b->nodes[static_cast<std::size_t>(id)].shape; }
constexpr DType Value::dtype() const { return b->nodes[static_cast<std::size_t>(id)].dtype; }

constexpr LocationGuard::LocationGuard(Builder* b, const Loc& loc) : b_(b), set_(!b->has_user_loc) {
  if (set_) b_->user_loc = loc, b_->has_user_loc = true;
}
constexpr LocationGuard::~LocationGuard() {
  if (set_) b_->has_user_loc = false;
}

constexpr Value Scope::input(std::string_view name, Shape shape, In opts, Loc loc) const {
  loc = b->where(loc);
  Node n;
  n.kind = NodeKind::input;
  n.shape = shape;
  n.dtype = opts.dtype;
  n.requires_grad = opts.grad && opts.dtype == DType::real;
  std::string full = join(name);
  b->add_node(n, full, loc);
  b->add_leaf(full, int(b->nodes.size()) - 1);
  return {b, int(b->nodes.size()) - 1};
}

constexpr Value Scope::param(std::string_view name, Shape shape, Init init, Loc loc) const {
  loc = b->where(loc);
  std::string full = join(name);
  for (const Real* r : {&init.a, &init.b})
    if (r->is_hyper() && (r->hyper >= int(b->nodes.size()) || b->nodes[std::size_t(r->hyper)].kind != NodeKind::hyper))
      b->fail(Msg("parameter '").add(full).add("': its init names a hyperparameter of another graph"), loc);
  if (!shape.is_static())
    b->fail(Msg("parameter '").add(full).add("' needs static dims, got ").add(shape), loc);
  Node n;
  n.kind = NodeKind::param;
  n.shape = shape;
  n.init = init;
  n.requires_grad = true;
  b->add_node(n, full, loc);
  b->add_leaf(full, int(b->nodes.size()) - 1);
  return {b, int(b->nodes.size()) - 1};
}

constexpr Real Scope::hyper(std::string_view name, double value, Loc loc) const {
  loc = b->where(loc);
  const std::string full = join(name);
  for (int h : b->hypers)
    if (b->name_of(h) == full) {
      const double had = b->nodes[std::size_t(h)].hyper_default();
      if (had != value) b->fail(Msg("hyperparameter '").add(full).add("' is declared twice with different defaults"), loc);
      Real r = value;
      r.hyper = h;
      return r;
    }
  Node n;
  n.kind = NodeKind::hyper;
  n.attr = encode_attrs(value);
  b->add_node(n, full, loc);
  const int id = int(b->nodes.size()) - 1;
  b->hypers.push_back(id);
  Real r = value;
  r.hyper = id;
  return r;
}

template <OpType Op>
constexpr Value Scope::apply(std::initializer_list<Value> inputs, const options_t<Op>& options, Loc loc) const {
  loc = b->where(loc);
  constexpr const OpDef* def = &op_def<Op>;
  Node n;
  n.kind = NodeKind::op;
  n.op = def;
  n.attr = encode_attrs(options);
  std::array<Shape, kMaxInputs> shapes{};
  std::array<DType, kMaxInputs> dtypes{};
  n.region = std::uint8_t(b->region);
  int foreign = -1;  // an input from a scan's body this op may not read
  for (const Value& v : inputs) {
    if (n.n_in == kMaxInputs || !b->check_value(v, Op::name, loc)) break;
    const int r = b->nodes[static_cast<std::size_t>(v.id)].region;
    if (r != 0 && r != b->region && foreign < 0) foreign = n.n_in;
    shapes[static_cast<std::size_t>(n.n_in)] = v.shape();
    dtypes[static_cast<std::size_t>(n.n_in)] = v.dtype();
    n.in[static_cast<std::size_t>(n.n_in++)] = v.id;
  }
  auto where = [&] {
    Msg m("op ");
    m.add(Op::name);
    if (!prefix.empty()) m.add(" in '").add(prefix).add("'");
    return m.add(": ");
  };
  for (int k = 0; k + 1 < n.attr.n; ++k)
    if (n.attr.real_at & (1u << k)) {
      const std::int64_t h = std::int64_t(n.attr.w[std::size_t(k + 1)]) - 1;
      if (h >= 0 && (h >= std::int64_t(b->nodes.size()) || b->nodes[std::size_t(h)].kind != NodeKind::hyper))
        b->fail(where().add("an option names a hyperparameter of another graph"), loc);
    }
  if (foreign >= 0) {
    b->fail(where().add("input ").add(foreign).add(b->region == 0 ? " is a value inside a scan's body; return it from the body (ScanStepResult) and use the scan's result"
                                                                  : " is a value inside another scan's body"), loc);
  } else if (n.attr.overflow) {
    b->fail(where().add("its options need more than ").add(kAttrWords).add(" words"), loc);
  } else if (Op::arity >= 0 ? n.n_in != Op::arity : (n.n_in < 1 || int(inputs.size()) > kMaxInputs)) {
    if (Op::arity >= 0)
      b->fail(where().add("takes ").add(Op::arity).add(" inputs, got ").add(int(inputs.size())), loc);
    else
      b->fail(where().add("takes 1 to ").add(kMaxInputs).add(" inputs, got ").add(int(inputs.size())), loc);
  } else {
    ShapeResult r = def->shape(ShapeCtx{shapes.data(), dtypes.data(), n.n_in, n.attr});
    if (!r.error.empty()) b->fail(where().add(r.error.view()), loc);
    n.shape = r.shape;
    n.dtype = r.dtype;
    n.scratch = r.scratch;
  }
  b->add_node(n, prefix, loc);
  return {b, int(b->nodes.size()) - 1};
}

}  // namespace ctgrad
