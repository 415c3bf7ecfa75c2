// Passes over a frozen graph: the forward and backward schedules and the memory plan. They run in
// constant evaluation for a graph frozen at compile time (tables sized by its N) and at run time
// for one frozen at run time (the same code, its tables RunTimeArrays); the executor only reads
// the result.
//
// Timeline: forward step s runs at time s, backward step b at time F + b (F forward steps).
// A forward step is a level (nodes whose inputs are all computed earlier), so its nodes may run
// concurrently. A backward step is a level in reverse, split so that no two nodes in it add to
// the same gradient: accumulation order is then fixed, whatever the thread count.
// Each buffer (a value, a gradient, an op's scratch) lives over an interval of that timeline;
// greedy interval colouring gives slots, and slot bytes are sized when the runtime dims are bound.
#pragma once
#include <algorithm>
#include <memory>

#include <ctgrad/graph/graph.hpp>

namespace ctgrad {

enum class BufKind : std::uint8_t { value, grad, scratch };

struct Buffer {
  BufKind kind = BufKind::value;
  int node = -1;
  int start = 0, end = 0;  // inclusive, in steps
  Dim elems = 0;
  DType dtype = DType::real;
  int slot = -1;
};

// A run-time plan's table: n elements, value-initialised (bool included: PlanView reads const bool*).
template <class T>
class RunTimeArray {
 public:
  RunTimeArray() = default;
  explicit RunTimeArray(std::size_t n) : p_(new T[n]()), n_(n) {}
  T& operator[](std::size_t i) { return p_[i]; }
  const T& operator[](std::size_t i) const { return p_[i]; }
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  T* begin() { return p_.get(); }
  T* end() { return p_.get() + n_; }
  const T* begin() const { return p_.get(); }
  const T* end() const { return p_.get() + n_; }
  std::size_t size() const { return n_; }

 private:
  std::unique_ptr<T[]> p_;
  std::size_t n_ = 0;
};

// A plan's table of M x (nodes) + A elements: a std::array for a graph frozen at compile time
// (N nodes), a RunTimeArray for one frozen at run time (N == kRunTimeSize, sized by plan_array).
template <class T, int N, std::size_t M = 1, std::size_t A = 0>
using PlanArray = std::conditional_t<N == kRunTimeSize, RunTimeArray<T>, std::array<T, M * std::size_t(N > 0 ? N : 1) + A>>;
template <class T, int N, std::size_t M = 1, std::size_t A = 0>
constexpr PlanArray<T, N, M, A> plan_array(int n) {
  if constexpr (N == kRunTimeSize) return PlanArray<T, N, M, A>(M * std::size_t(n > 0 ? n : 1) + A);
  else return {};
}

template <int N>
struct Plan {
  static constexpr std::size_t U = N > 0 ? std::size_t(N) : 1;
  template <class T, std::size_t M = 1, std::size_t A = 0>
  using Table = PlanArray<T, N, M, A>;
  constexpr explicit Plan(int n = N)
      : n_nodes(n), fwd_order(plan_array<int, N>(n)), bwd_order(plan_array<int, N>(n)), fwd_begin(plan_array<int, N, 1, 1>(n)),
        bwd_begin(plan_array<int, N, 1, 1>(n)), fwd_step(plan_array<int, N>(n)), bwd_step(plan_array<int, N>(n)),
        needs_grad(plan_array<bool, N>(n)), runs_vjp(plan_array<bool, N>(n)), zero_order(plan_array<int, N>(n)),
        zero_begin(plan_array<int, N, 1, 1>(n)), grad_fresh(plan_array<bool, N>(n)), assigns(plan_array<unsigned, N>(n)),
        buffers(plan_array<Buffer, N, 3>(n)), value_buf(plan_array<int, N>(n)), grad_buf(plan_array<int, N>(n)),
        scratch_buf(plan_array<int, N>(n)), view_of(plan_array<int, N>(n)), grad_view_of(plan_array<int, N>(n)),
        vjp_skip(plan_array<bool, N>(n)), in_place_of(plan_array<int, N>(n)) {}
  bool training = true;
  bool sound = true;  // every gradient is written before it is read (checked by Program)
  int n_nodes = 0;
  // Schedules: steps index ranges of the order arrays.
  int n_fwd = 0, n_bwd = 0;
  Table<int> fwd_order, bwd_order;
  Table<int, 1, 1> fwd_begin, bwd_begin;
  Table<int> fwd_step, bwd_step;  // step of each node, -1 if it does not run
  Table<bool> needs_grad, runs_vjp;
  // Gradients made ready just before backward step b: zero_order[zero_begin[b] .. zero_begin[b+1]).
  // Each is zeroed, unless grad_fresh: then its first contributor writes it (=) instead of
  // adding to zeros (assigns[c] bit k: node c's VJP writes input k's gradient so), which saves
  // a memset and a read of every element.
  Table<int> zero_order;
  Table<int, 1, 1> zero_begin;
  Table<bool> grad_fresh;
  Table<unsigned> assigns;
  // Buffers and slots.
  int n_buffers = 0, n_slots = 0;
  Table<Buffer, 3> buffers;
  Table<int> value_buf, grad_buf, scratch_buf;  // -1 if none
  // A view op's value is its source's bytes (OpDef::view): the node whose storage it shares
  // (through chains of views), else -1. Its value_buf is that node's, kept alive for both.
  Table<int> view_of;
  // A view's gradient is its source's gradient bytes read with another shape, too. When the view
  // is the only consumer that adds to its source's gradient, the source's gradient is the view's
  // buffer (grad_view_of: the node whose gradient buffer it is, through chains of views, else
  // -1) and the view's VJP, a copy, does not run (vjp_skip).
  Table<int> grad_view_of;
  Table<bool> vjp_skip;
  // An in-place op's value overwrites its input 0's (OpDef::in_place) when that input is read by
  // nothing after this node's step, nor by another node of the same step (they run concurrently):
  // the input node whose buffer it takes, else -1. "Read" includes every VJP that saves it
  // (OpDef::saves), so an op whose VJP reads its input (gelu) is in place only when inferring.
  // Dropout, add, sub, scale, relu and the unary ops: a copy or a buffer and its traffic saved.
  Table<int> in_place_of;
};

namespace detail {

template <class G>
constexpr bool reads(const G& g, int consumer, int k) {
  return (g[consumer].op->saves & kSaveInput(k)) != 0;
}

// Greedy interval colouring, linear in practice: buffers in start order; slots whose tenant has
// ended return to a free list of their size class (dtype + which runtime symbols, to which
// powers), so a slot's tenants stay close in size; an exact size match is preferred.
template <int N>
constexpr void colour(Plan<N>& p) {
  using std::size_t;
  const int nb = p.n_buffers, n = p.n_nodes;
  auto order = plan_array<int, N, 3>(n);
  for (int i = 0; i < nb; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.begin() + nb, [&](int a, int b) {
    const Buffer &x = p.buffers[size_t(a)], &y = p.buffers[size_t(b)];
    return x.start != y.start ? x.start < y.start : a < b;
  });
  // Size classes.
  auto cls = plan_array<int, N, 3>(n);
  auto cls_key = plan_array<Buffer, N, 3>(n);
  int n_cls = 0;
  for (int i = 0; i < nb; ++i) {
    const Buffer& b = p.buffers[size_t(i)];
    int c = 0;
    while (c < n_cls && !(cls_key[size_t(c)].dtype == b.dtype && cls_key[size_t(c)].elems.exp == b.elems.exp)) ++c;
    if (c == n_cls) cls_key[size_t(n_cls++)] = b;
    cls[size_t(i)] = c;
  }
  // Busy slots as a min-heap on end time; free slots as per-class lists (intrusive, by slot).
  auto busy = plan_array<std::pair<int, int>, N, 3>(n);  // (-end, slot) for std::push_heap's max-heap
  int n_busy = 0;
  auto free_head = plan_array<int, N, 3>(n), free_next = plan_array<int, N, 3>(n), slot_cls = plan_array<int, N, 3>(n);
  auto slot_coef = plan_array<std::int64_t, N, 3>(n);
  for (int c = 0; c < n_cls; ++c) free_head[size_t(c)] = -1;
  for (int oi = 0; oi < nb; ++oi) {
    const int bi = order[size_t(oi)];
    Buffer& b = p.buffers[size_t(bi)];
    while (n_busy > 0 && -busy[0].first < b.start) {
      std::pop_heap(busy.begin(), busy.begin() + n_busy);
      const int s = busy[size_t(--n_busy)].second;
      free_next[size_t(s)] = free_head[size_t(slot_cls[size_t(s)])];
      free_head[size_t(slot_cls[size_t(s)])] = s;
    }
    const int c = cls[size_t(bi)];
    int best = -1, best_prev = -1, best_score = -1;
    for (int s = free_head[size_t(c)], prev = -1; s >= 0; prev = s, s = free_next[size_t(s)]) {
      const std::int64_t sc = slot_coef[size_t(s)];
      const int score = sc == b.elems.coef ? 3 : sc > b.elems.coef ? 2 : 1;
      if (score > best_score) best = s, best_prev = prev, best_score = score;
      if (score == 3) break;
    }
    if (best < 0) {
      best = p.n_slots++;
      slot_cls[size_t(best)] = c;
      slot_coef[size_t(best)] = b.elems.coef;
    } else {
      (best_prev < 0 ? free_head[size_t(c)] : free_next[size_t(best_prev)]) = free_next[size_t(best)];
      slot_coef[size_t(best)] = std::max(slot_coef[size_t(best)], b.elems.coef);
    }
    b.slot = best;
    busy[size_t(n_busy++)] = {-b.end, best};
    std::push_heap(busy.begin(), busy.begin() + n_busy);
  }
}

}  // namespace detail

// All passes are linear in the number of nodes and edges (up to sorting), so compile time stays
// flat as models grow.
template <class G>
constexpr auto make_plan(const G& g, bool training) {
  constexpr int NS = G::static_size;  // kRunTimeSize for a graph frozen at run time
  const int N = g.size;
  Plan<NS> p(N);
  p.training = training;
  if constexpr (NS != 0) {
    using std::size_t;
    auto at = [](auto& arr, int i) -> auto& { return arr[static_cast<size_t>(i)]; };

    // Consumers of each node, as (consumer, input position) in CSR form.
    auto cons_begin = plan_array<int, NS, 1, 1>(N);
    auto cons_node = plan_array<int, NS, kMaxInputs>(N), cons_pos = plan_array<int, NS, kMaxInputs>(N);
    for (int c = 0; c < N; ++c)
      for (int k = 0; k < g[c].n_in; ++k) ++at(cons_begin, g[c].in[size_t(k)] + 1);
    for (int i = 0; i < N; ++i) at(cons_begin, i + 1) += at(cons_begin, i);
    {
      auto fill = plan_array<int, NS>(N);
      for (int c = 0; c < N; ++c)
        for (int k = 0; k < g[c].n_in; ++k) {
          const int v = g[c].in[size_t(k)];
          const int slot = at(cons_begin, v) + at(fill, v)++;
          at(cons_node, slot) = c;
          at(cons_pos, slot) = k;
        }
    }

    // Forward levels, then a counting sort of the op nodes by level (ids ascending within one).
    auto level = plan_array<int, NS>(N);
    int n_levels = 0;
    for (int i = 0; i < N; ++i) {
      const Node& n = g[i];
      at(p.fwd_step, i) = -1;
      if (n.kind != NodeKind::op || n.region != 0) {  // a scan's body runs inside its scan (graph/scan.hpp)
        at(level, i) = -1;
        continue;
      }
      int l = 0;
      for (int k = 0; k < n.n_in; ++k) l = std::max(l, at(level, n.in[size_t(k)]) + 1);
      at(level, i) = l;
      at(p.fwd_step, i) = l;
      n_levels = std::max(n_levels, l + 1);
    }
    p.n_fwd = n_levels;
    for (int i = 0; i < N; ++i)
      if (at(level, i) >= 0) ++at(p.fwd_begin, at(level, i) + 1);
    for (int l = 0; l < n_levels; ++l) at(p.fwd_begin, l + 1) += at(p.fwd_begin, l);
    {
      auto fill = plan_array<int, NS>(N);
      for (int i = 0; i < N; ++i)
        if (at(level, i) >= 0) at(p.fwd_order, at(p.fwd_begin, at(level, i)) + at(fill, at(level, i))++) = i;
    }

    // Which values need a gradient: reachable from a leaf that wants one (forward) and reaching
    // a gradient seed (backward), through differentiable ops only.
    // Seeds: the loss; without one, every real output (a block whose output gradient comes from
    // outside, e.g. one layer of a runtime-depth stack).
    auto is_seed = [&](int i) {
      return g.loss >= 0 ? i == g.loss : g[i].is_output && g[i].dtype == DType::real;
    };
    auto from_leaf = plan_array<bool, NS>(N), to_loss = plan_array<bool, NS>(N);
    for (int i = 0; i < N; ++i) {
      const Node& n = g[i];
      if (n.region != 0) continue;
      if (n.kind != NodeKind::op) {
        at(from_leaf, i) = n.requires_grad;
      } else if (n.op->differentiable && n.dtype == DType::real) {
        for (int k = 0; k < n.n_in; ++k) at(from_leaf, i) |= at(from_leaf, n.in[size_t(k)]);
      }
    }
    if (training) {
      for (int i = 0; i < N; ++i) at(to_loss, i) = is_seed(i);
      for (int i = N - 1; i >= 0; --i) {
        const Node& n = g[i];
        if (!at(to_loss, i) || n.kind != NodeKind::op || !n.op->differentiable || n.dtype != DType::real) continue;
        for (int k = 0; k < n.n_in; ++k) at(to_loss, n.in[size_t(k)]) = true;
      }
    }
    for (int i = 0; i < N; ++i)
      at(p.needs_grad, i) = at(from_leaf, i) && at(to_loss, i) && g[i].dtype == DType::real;
    for (int i = 0; i < N; ++i) {
      const Node& n = g[i];
      bool any = false;
      if (n.kind == NodeKind::op && at(p.needs_grad, i) && n.op->differentiable)
        for (int k = 0; k < n.n_in; ++k) any |= at(p.needs_grad, n.in[size_t(k)]);
      at(p.runs_vjp, i) = any;
      at(p.bwd_step, i) = -1;
    }

    // Backward steps: levels in reverse, each split into groups that add to no common gradient;
    // within a level, higher node ids go first.
    int pos = 0, step = 0;
    if (training) {
      auto written = plan_array<int, NS>(N);  // group stamp (step + 1) of the last writer of each gradient
      auto pending = plan_array<int, NS>(N);
      for (int l = n_levels - 1; l >= 0; --l) {
        int left = 0;
        for (int j = at(p.fwd_begin, l + 1) - 1; j >= at(p.fwd_begin, l); --j)
          if (at(p.runs_vjp, at(p.fwd_order, j))) at(pending, left++) = at(p.fwd_order, j);
        while (left > 0) {
          at(p.bwd_begin, step) = pos;
          int kept = 0;
          for (int j = 0; j < left; ++j) {
            const int i = at(pending, j);
            const Node& n = g[i];
            bool clash = false;
            for (int k = 0; k < n.n_in; ++k) clash |= at(written, n.in[size_t(k)]) == step + 1;
            if (clash) {
              at(pending, kept++) = i;
              continue;
            }
            for (int k = 0; k < n.n_in; ++k)
              if (at(p.needs_grad, n.in[size_t(k)])) at(written, n.in[size_t(k)]) = step + 1;
            at(p.bwd_order, pos++) = i;
            at(p.bwd_step, i) = step;
          }
          left = kept;
          ++step;
        }
      }
    }
    p.n_bwd = step;
    at(p.bwd_begin, step) = pos;

    // Gradients shared with a view (highest ids first, so a chain of views resolves to its end),
    // or with an op whose VJP can take an input's gradient on its output gradient's buffer
    // (OpDef::shares_grad: dropout, add): that VJP then runs on the shared buffer, told to
    // assign (an inactive dropout's, and add's for that input, do nothing).
    for (int i = 0; i < N; ++i) at(p.grad_view_of, i) = -1;
    auto only_writer = [&](int i, int src) {  // i's VJP alone adds to src's gradient, once
      if (!at(p.needs_grad, src) || g[src].kind == NodeKind::param || is_seed(src)) return false;
      int writers = 0;  // consumer edges whose VJP adds to src's gradient: i's is one
      for (int e = at(cons_begin, src); e < at(cons_begin, src + 1); ++e) writers += at(p.runs_vjp, at(cons_node, e));
      return writers == 1;
    };
    if (training)
      for (int i = N - 1; i >= 0; --i) {
        const Node& n = g[i];
        if (n.kind != NodeKind::op || !at(p.runs_vjp, i) || is_seed(i)) continue;
        int k = -1;
        if (n.op->view) {
          if (only_writer(i, n.in[0])) k = 0;
        } else {
          for (int j = 0; j < n.n_in && k < 0; ++j)
            if ((n.op->shares_grad & n.op->assigns & kSaveInput(j)) && g[n.in[size_t(j)]].shape.numel() == n.shape.numel() &&
                only_writer(i, n.in[size_t(j)]))
              k = j;
        }
        if (k < 0) continue;
        const int src = n.in[size_t(k)];
        at(p.grad_view_of, src) = at(p.grad_view_of, i) >= 0 ? at(p.grad_view_of, i) : i;
        if (n.op->view) at(p.vjp_skip, i) = true;
        else at(p.assigns, i) |= kSaveInput(k);
      }

    // Buffers and their lifetimes.
    const int F = p.n_fwd;
    const int t_end = F + p.n_bwd;  // past every step: outputs and leaf gradients live to here
    for (int i = 0; i < N; ++i)
      at(p.value_buf, i) = at(p.grad_buf, i) = at(p.scratch_buf, i) = at(p.view_of, i) = at(p.in_place_of, i) = -1;
    // Input 0 of in-place op i, if i may take its buffer: input 0 is an op's value in the arena
    // that no view shares (a view made later would lengthen the buffer's life), of i's size and
    // dtype, read by i through input 0 only, and its buffer's last reader is i, alone in its step.
    // Buffers are made in id order, so the source's buffer already spans all its readers.
    auto in_place_source = [&](int i) {
      const Node& n = g[i];
      if (!n.op->in_place || n.op->view || n.n_in < 1) return -1;
      const int src = n.in[0];
      const Node& s = g[src];
      if (s.kind != NodeKind::op || at(p.view_of, src) >= 0 || at(p.value_buf, src) < 0) return -1;
      if (s.dtype != n.dtype || !(s.shape.numel() == n.shape.numel())) return -1;
      for (int k = 1; k < n.n_in; ++k)
        if (n.in[size_t(k)] == src) return -1;
      const int step_i = at(p.fwd_step, i);
      if (at(p.buffers, at(p.value_buf, src)).end != step_i) return -1;
      for (int e = at(cons_begin, src); e < at(cons_begin, src + 1); ++e) {
        const int c = at(cons_node, e);
        if (c != i && (g[c].op->view || at(p.fwd_step, c) == step_i)) return -1;
      }
      return src;
    };
    auto shared_grad_end = plan_array<int, NS>(N);  // the last step that reads a gradient shared with a view
    auto add = [&](BufKind kind, int node, int start, int end, Dim elems, DType dt) {
      Buffer b;
      b.kind = kind, b.node = node, b.start = start, b.end = std::max(start, end);
      b.elems = elems, b.dtype = dt;
      at(p.buffers, p.n_buffers) = b;
      return p.n_buffers++;
    };
    for (int i = 0; i < N; ++i) {
      const Node& n = g[i];
      if (n.kind == NodeKind::param) continue;  // parameters live in the parameter store
      if (n.region != 0) continue;              // a scan's body: in its scan's memory
      // Value. Inputs live in their own stores (set once, kept across steps), not in the arena.
      const int start = n.kind == NodeKind::input ? 0 : at(p.fwd_step, i);
      int end = start, g_start = is_seed(i) ? F : t_end;
      for (int e = at(cons_begin, i); e < at(cons_begin, i + 1); ++e) {
        const int c = at(cons_node, e);
        end = std::max(end, at(p.fwd_step, c));
        if (at(p.runs_vjp, c)) {
          if (detail::reads(g, c, at(cons_pos, e))) end = std::max(end, F + at(p.bwd_step, c));
          g_start = std::min(g_start, F + at(p.bwd_step, c));
        }
      }
      if (at(p.runs_vjp, i) && (n.op->saves & kSaveOutput)) end = std::max(end, F + at(p.bwd_step, i));
      if (n.is_output) end = t_end;
      if (n.kind == NodeKind::op && n.op->view) {
        const int src = n.in[0];
        const int root = at(p.view_of, src) >= 0 ? at(p.view_of, src) : src;
        at(p.view_of, i) = root;
        at(p.value_buf, i) = at(p.value_buf, root);  // -1 for an input or a parameter: stored outside
        if (at(p.value_buf, i) >= 0) {
          Buffer& rb = at(p.buffers, at(p.value_buf, i));
          rb.end = std::max(rb.end, end);
        }
      } else if (n.kind == NodeKind::op && in_place_source(i) >= 0) {
        const int src = n.in[0];
        at(p.in_place_of, i) = src;
        at(p.value_buf, i) = at(p.value_buf, src);
        Buffer& b = at(p.buffers, at(p.value_buf, i));
        b.end = std::max(b.end, end);
      } else if (n.kind == NodeKind::op) {
        at(p.value_buf, i) = add(BufKind::value, i, start, end, n.shape.numel(), n.dtype);
      }
      // Scratch.
      if (n.kind == NodeKind::op && !(n.scratch == Dim(0))) {
        const int s_end = at(p.runs_vjp, i) ? F + at(p.bwd_step, i) : start;
        at(p.scratch_buf, i) = add(BufKind::scratch, i, start, s_end, n.scratch, DType::real);
      }
      // Gradient: from its first contribution (or the seed) to its use by the node's own VJP.
      if (at(p.needs_grad, i)) {
        const int g_end = at(p.runs_vjp, i) ? F + at(p.bwd_step, i) : t_end;
        if (g_start > g_end) p.sound = false;  // a gradient read before anything writes it
        if (at(p.grad_view_of, i) >= 0) at(shared_grad_end, i) = g_end;
        else at(p.grad_buf, i) = add(BufKind::grad, i, g_start, g_end, n.shape.numel(), DType::real);
      }
    }
    for (int i = 0; i < N; ++i)
      if (at(p.grad_view_of, i) >= 0) {  // the view's buffer (made later: a higher id) lives on until read here
        const int gb = at(p.grad_buf, at(p.grad_view_of, i));
        at(p.grad_buf, i) = gb;
        Buffer& b = at(p.buffers, gb);
        b.end = std::max(b.end, at(shared_grad_end, i));
      }
    detail::colour(p);

    // Zero each activation gradient just before its first contribution (seeds are written):
    // a counting sort of the gradient buffers by start step.
    for (int i = 0; i < N; ++i) {
      const int gb = at(p.grad_buf, i);
      if (gb >= 0 && !is_seed(i) && at(p.grad_view_of, i) < 0 && at(p.buffers, gb).start < t_end)
        ++at(p.zero_begin, at(p.buffers, gb).start - F + 1);
    }
    for (int b = 0; b < p.n_bwd; ++b) at(p.zero_begin, b + 1) += at(p.zero_begin, b);
    {
      auto fill = plan_array<int, NS>(N);
      for (int i = 0; i < N; ++i) {
        const int gb = at(p.grad_buf, i);
        if (gb < 0 || is_seed(i) || at(p.grad_view_of, i) >= 0 || at(p.buffers, gb).start >= t_end) continue;
        const int b = at(p.buffers, gb).start - F;
        at(p.zero_order, at(p.zero_begin, b) + at(fill, b)++) = i;
        // The first contributor (one per step: a step's nodes add to no common gradient) may
        // assign, if it reads this value through one input only and its op can.
        int first = -1, uses = 0, pos = -1;
        for (int e = at(cons_begin, i); e < at(cons_begin, i + 1); ++e) {
          const int c = at(cons_node, e);
          if (!at(p.runs_vjp, c) || at(p.bwd_step, c) != b) continue;
          if (first >= 0 && first != c) uses = 2;  // cannot happen (see above): stay safe
          first = c, ++uses, pos = at(cons_pos, e);
        }
        if (first >= 0 && uses == 1 && (g[first].op->assigns & kSaveInput(pos))) {
          at(p.grad_fresh, i) = true;
          at(p.assigns, first) |= kSaveInput(pos);
        }
      }
    }
  }
  return p;
}

}  // namespace ctgrad
