// The op contract. An op is a struct with:
//   static constexpr const char* name;          // shown in errors and traces
//   static constexpr int arity;                 // number of inputs; -1: 1 to kMaxInputs
//   static constexpr ShapeResult shape(const ShapeCtx&[, const Options&]);  // shape rule, compile time
//   template <class T> static void forward(const OpArgs&);
//   template <class T> static void vjp(const OpArgs&);    // adds input gradients (+=)
// and optionally:
//   using Options = MyOptions;                     // its attributes: an aggregate (graph/attrs.hpp),
//                                                  // read back with args.attrs<MyOp>()
//   static constexpr bool differentiable = false;  // then vjp may be omitted
//   static constexpr unsigned saves = ...;         // what vjp reads (kSaveInput(k) | kSaveOutput)
//   template <class T> static void reference_forward(const OpArgs&);  // plain loops, for the harness
//   static constexpr bool view = true;           // out is input 0's bytes read with another shape
//                                                  // (same dtype and count): the plan gives it no
//                                                  // buffer of its own; forward must then not copy
//   static constexpr bool in_place = true;       // forward is correct with out.data == in[0].data
//                                                  // (same dtype and count): the plan then lets out
//                                                  // take input 0's buffer when nothing else reads
//                                                  // input 0 afterwards, nor in the same step;
//                                                  // it trusts every op's `saves`: a VJP that reads
//                                                  // an input it does not declare may find it overwritten
//   static constexpr unsigned shares_grad = kSaveInput(k) | ...;  // vjp is correct with
//                                                  // gin[k].data == gout->data when told to assign
//                                                  // k (same count; at most one such k per run):
//                                                  // the plan then gives input k's gradient the
//                                                  // output gradient's buffer when this vjp is
//                                                  // its only contributor
//   static constexpr unsigned assigns = kSaveInput(k) | ...;  // vjp honours OpArgs::assign(k): when
//                                                  // set, gin[k] holds garbage and vjp writes every
//                                                  // element of it (=) instead of adding
// T is float or double (double is what gradcheck runs). The graph stores a pointer to one
// OpDef per op type; nothing else about an op is known to graph/.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>

#include <ctgrad/graph/attrs.hpp>
#include <ctgrad/graph/dim.hpp>

namespace ctgrad {

enum class DType : std::uint8_t { real, index };  // real = the program's T; index = int32

inline constexpr int kMaxInputs = 24;  // a scan's inputs: its states, sequences and what its body reads

struct ShapeCtx {
  const Shape* in;
  const DType* dtype;
  int n_in;
  const AttrWords& attr;
};

struct ShapeResult {
  Shape shape;
  DType dtype = DType::real;
  Dim scratch = 0;  // elements of T the op keeps from its forward for its vjp (e.g. norm stats)
  Msg error;        // set by the rule when the inputs do not fit

  static constexpr ShapeResult fail(Msg m) {
    ShapeResult r;
    r.error = m;
    return r;
  }
};

// A tensor as an op sees it at run time: dense, row-major.
struct TensorRef {
  void* data = nullptr;
  std::array<std::int64_t, kMaxRank> dim{};
  int rank = 0;
  std::int64_t numel = 0;
  DType dtype = DType::real;

  template <class U>
  U* as() const {
    return static_cast<U*>(data);
  }
  // Size of axis i; negative i counts from the end.
  std::int64_t size(int i) const { return dim[static_cast<std::size_t>(i < 0 ? rank + i : i)]; }
  // Product of all dims but the last `keep`.
  std::int64_t rows(int keep = 1) const {
    std::int64_t r = 1;
    for (int k = 0; k < rank - keep; ++k) r *= dim[static_cast<std::size_t>(k)];
    return r;
  }
};

struct OpArgs {
  const AttrWords& attr;  // the op's options, hyperparameters resolved: read with attrs<Op>()
  const TensorRef* in;  // n_in inputs
  int n_in;
  const TensorRef& out;
  const TensorRef& scratch;  // ShapeResult::scratch elements, alive from forward to vjp
  // Only in vjp:
  const TensorRef* gout = nullptr;  // gradient of out
  const TensorRef* gin = nullptr;   // gin[k].data == nullptr when input k needs no gradient
  unsigned assign_mask = 0;         // bit k: this vjp is the first to write gin[k]: assign, do not add
  bool assign(int k) const { return (assign_mask >> k & 1u) != 0; }
  // For random ops: same (seed, step, node, element) gives the same number on any thread. The
  // vjp sees the step of the forward it differentiates.
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint64_t node = 0;  // the node's id; inside a scan's body, also the time step: (t + 1) << 32 | id
  bool training = true;  // false in Mode::infer: dropout is the identity
  // Data parallelism: this process holds rows shard x rows .. (shard + 1) x rows of the global
  // batch, so a random op numbers its elements from shard x numel: the masks of the whole batch
  // are the ones a single process would draw.
  std::uint64_t shard = 0;

  template <class Op>
  options_t<Op> attrs() const {
    return decode_attrs<options_t<Op>>(attr);
  }
};

using KernelFn = void (*)(const OpArgs&);

inline constexpr unsigned kSaveOutput = 1u << 31;
constexpr unsigned kSaveInput(int k) { return 1u << k; }
inline constexpr unsigned kSaveAll = 0xffffffffu;

struct OpDef {
  const char* name;
  int arity;
  bool differentiable;
  unsigned saves;
  unsigned assigns;  // inputs whose gradient vjp can assign (see OpArgs::assign)
  bool view;         // out aliases input 0 (see the contract above)
  bool in_place;     // out may overwrite input 0 (see the contract above)
  unsigned shares_grad;  // inputs whose gradient may be the output gradient's buffer (see above)
  ShapeResult (*shape)(const ShapeCtx&);
  KernelFn forward[2];  // [float, double]
  KernelFn vjp[2];
  KernelFn reference[2];  // optional plain scalar forward, checked against `forward` by the harness
};

template <class Op>
concept OpType = requires(const ShapeCtx& c, const options_t<Op>& o) {
  { Op::name } -> std::convertible_to<const char*>;
  { Op::arity } -> std::convertible_to<int>;
} && (requires(const ShapeCtx& c) { { Op::shape(c) } -> std::same_as<ShapeResult>; } ||
      requires(const ShapeCtx& c, const options_t<Op>& o) { { Op::shape(c, o) } -> std::same_as<ShapeResult>; });

// The shape rule with the node's options decoded (ops without options take the context only).
template <class Op>
constexpr ShapeResult run_shape_rule(const ShapeCtx& c) {
  if constexpr (requires { Op::shape(c); })
    return Op::shape(c);
  else
    return Op::shape(c, decode_attrs<options_t<Op>>(c.attr));
}

template <class Op>
concept HasVjp = requires(const OpArgs& a) {
  Op::template vjp<float>(a);
  Op::template vjp<double>(a);
};

template <class Op>
constexpr bool is_differentiable() {
  if constexpr (requires { Op::differentiable; })
    return Op::differentiable;
  else
    return true;
}

// The compile error for an op that has no vjp: the op's name is in the first line.
template <Msg M>
struct ctgrad_op_has_no_vjp {
  static_assert(M.empty(),
                "ctgrad: this op has no vjp(); give it one, or declare it "
                "`static constexpr bool differentiable = false;`");
  static constexpr bool ok = true;
};

template <class Op>
consteval OpDef make_op_def() {
  OpDef d{};
  d.name = Op::name;
  d.arity = Op::arity;
  d.differentiable = is_differentiable<Op>();
  if constexpr (requires { Op::saves; })
    d.saves = Op::saves;
  else
    d.saves = kSaveAll;
  if constexpr (requires { Op::assigns; }) d.assigns = Op::assigns;
  if constexpr (requires { Op::view; }) d.view = Op::view;
  if constexpr (requires { Op::in_place; }) d.in_place = Op::in_place;
  if constexpr (requires { Op::shares_grad; }) d.shares_grad = Op::shares_grad;
  d.shape = &run_shape_rule<Op>;
  d.forward[0] = &Op::template forward<float>;
  d.forward[1] = &Op::template forward<double>;
  if constexpr (requires(const OpArgs& a) { Op::template reference_forward<float>(a); }) {
    d.reference[0] = &Op::template reference_forward<float>;
    d.reference[1] = &Op::template reference_forward<double>;
  }
  if constexpr (is_differentiable<Op>()) {
    static_assert(ctgrad_op_has_no_vjp<HasVjp<Op> ? Msg() : Msg("op ").add(Op::name).add(
                                                              " has no vjp<T>() and is not "
                                                              "declared non-differentiable")>::ok);
    if constexpr (HasVjp<Op>) {
      d.vjp[0] = &Op::template vjp<float>;
      d.vjp[1] = &Op::template vjp<double>;
    }
  }
  return d;
}

template <OpType Op>
inline constexpr OpDef op_def = make_op_def<Op>();

}  // namespace ctgrad
