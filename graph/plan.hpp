// Compile-time passes over a frozen graph: the forward and backward schedules and the memory
// plan. Everything here runs in constant evaluation; the executor only reads the result.
//
// Timeline: forward step s runs at time s, backward step b at time F + b (F forward steps).
// A forward step is a level (nodes whose inputs are all computed earlier), so its nodes may run
// concurrently. A backward step is a level in reverse, split so that no two nodes in it add to
// the same gradient: accumulation order is then fixed, whatever the thread count.
// Each buffer (a value, a gradient, an op's scratch) lives over an interval of that timeline;
// greedy interval colouring gives slots, and slot bytes are sized when the runtime dims are bound.
#pragma once
#include <algorithm>

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

template <int N>
struct Plan {
  static constexpr std::size_t U = N > 0 ? std::size_t(N) : 1;
  bool training = true;
  // Schedules: steps index ranges of the order arrays.
  int n_fwd = 0, n_bwd = 0;
  std::array<int, U> fwd_order{}, bwd_order{};
  std::array<int, U + 1> fwd_begin{}, bwd_begin{};
  std::array<int, U> fwd_step{}, bwd_step{};  // step of each node, -1 if it does not run
  std::array<bool, U> needs_grad{}, runs_vjp{};
  // Gradients zeroed just before backward step b: zero_order[zero_begin[b] .. zero_begin[b+1]).
  std::array<int, U> zero_order{};
  std::array<int, U + 1> zero_begin{};
  // Buffers and slots.
  int n_buffers = 0, n_slots = 0;
  std::array<Buffer, 3 * U> buffers{};
  std::array<int, U> value_buf{}, grad_buf{}, scratch_buf{};  // -1 if none
};

namespace detail {

template <class G>
constexpr bool reads(const G& g, int consumer, int k) {
  return (g[consumer].op->saves & kSaveInput(k)) != 0;
}

// Greedy interval colouring. Only buffers of the same dtype and the same symbolic signature
// (which runtime symbols, to which powers) share a slot, so a slot's size stays close to each
// tenant's; exact size matches are preferred.
template <int N>
constexpr void colour(Plan<N>& p) {
  std::array<int, Plan<N>::U * 3> order{};
  for (int i = 0; i < p.n_buffers; ++i) order[static_cast<std::size_t>(i)] = i;
  std::sort(order.begin(), order.begin() + p.n_buffers, [&](int a, int b) {
    const Buffer &x = p.buffers[static_cast<std::size_t>(a)], &y = p.buffers[static_cast<std::size_t>(b)];
    return x.start != y.start ? x.start < y.start : a < b;
  });
  std::array<int, Plan<N>::U * 3> slot_end{};
  std::array<Dim, Plan<N>::U * 3> slot_size{};
  std::array<DType, Plan<N>::U * 3> slot_dtype{};
  for (int oi = 0; oi < p.n_buffers; ++oi) {
    Buffer& b = p.buffers[static_cast<std::size_t>(order[static_cast<std::size_t>(oi)])];
    int best = -1, best_score = -1;
    for (int s = 0; s < p.n_slots; ++s) {
      auto su = static_cast<std::size_t>(s);
      if (slot_end[su] >= b.start || slot_dtype[su] != b.dtype || slot_size[su].exp != b.elems.exp)
        continue;
      int score = slot_size[su].coef == b.elems.coef ? 3 : slot_size[su].coef > b.elems.coef ? 2 : 1;
      if (score > best_score) best = s, best_score = score;
    }
    if (best < 0) {
      best = p.n_slots++;
      slot_size[static_cast<std::size_t>(best)] = b.elems;
      slot_dtype[static_cast<std::size_t>(best)] = b.dtype;
    } else if (slot_size[static_cast<std::size_t>(best)].coef < b.elems.coef) {
      slot_size[static_cast<std::size_t>(best)] = b.elems;
    }
    slot_end[static_cast<std::size_t>(best)] = b.end;
    b.slot = best;
  }
}

}  // namespace detail

template <class G>
constexpr auto make_plan(const G& g, bool training) {
  constexpr int N = G::size;
  Plan<N> p;
  p.training = training;
  if constexpr (N > 0) {
    using std::size_t;
    auto at = [](auto& arr, int i) -> auto& { return arr[static_cast<size_t>(i)]; };

    // Forward levels.
    std::array<int, size_t(N)> level{};
    int n_levels = 0;
    for (int i = 0; i < N; ++i) {
      const Node& n = g[i];
      if (n.kind != NodeKind::op) {
        at(level, i) = -1;
        continue;
      }
      int l = 0;
      for (int k = 0; k < n.n_in; ++k) l = std::max(l, at(level, n.in[size_t(k)]) + 1);
      at(level, i) = l;
      n_levels = std::max(n_levels, l + 1);
    }
    p.n_fwd = n_levels;
    int pos = 0;
    for (int l = 0; l < n_levels; ++l) {
      at(p.fwd_begin, l) = pos;
      for (int i = 0; i < N; ++i)
        if (at(level, i) == l) at(p.fwd_order, pos++) = i, at(p.fwd_step, i) = l;
    }
    at(p.fwd_begin, n_levels) = pos;
    for (int i = 0; i < N; ++i)
      if (g[i].kind != NodeKind::op) at(p.fwd_step, i) = -1;

    // Which values need a gradient: reachable from a leaf that wants one (forward) and reaching
    // the loss (backward), through differentiable ops only.
    std::array<bool, size_t(N)> from_leaf{}, to_loss{};
    for (int i = 0; i < N; ++i) {
      const Node& n = g[i];
      if (n.kind != NodeKind::op) {
        at(from_leaf, i) = n.requires_grad;
      } else if (n.op->differentiable && n.dtype == DType::real) {
        for (int k = 0; k < n.n_in; ++k) at(from_leaf, i) |= at(from_leaf, n.in[size_t(k)]);
      }
    }
    // Gradient seeds: the loss; without one, every real output (a block whose output gradient
    // comes from outside, e.g. one layer of a runtime-depth stack).
    auto is_seed = [&](int i) {
      return g.loss >= 0 ? i == g.loss : g[i].is_output && g[i].dtype == DType::real;
    };
    if (training) {
      for (int i = 0; i < N; ++i) at(to_loss, i) = is_seed(i);
      for (int i = N - 1; i >= 0; --i) {
        const Node& n = g[i];
        if (!at(to_loss, i) || n.kind != NodeKind::op || !n.op->differentiable) continue;
        for (int k = 0; k < n.n_in; ++k) at(to_loss, n.in[size_t(k)]) = true;
      }
    }
    for (int i = 0; i < N; ++i) at(p.needs_grad, i) = at(from_leaf, i) && at(to_loss, i);
    for (int i = 0; i < N; ++i) {
      const Node& n = g[i];
      bool any = false;
      if (n.kind == NodeKind::op && at(p.needs_grad, i) && n.op->differentiable)
        for (int k = 0; k < n.n_in; ++k) any |= at(p.needs_grad, n.in[size_t(k)]);
      at(p.runs_vjp, i) = any;
      at(p.bwd_step, i) = -1;
    }

    // Backward steps: levels in reverse, each split into groups that share no gradient.
    pos = 0;
    int step = 0;
    if (training) {
      for (int l = n_levels - 1; l >= 0; --l) {
        std::array<bool, size_t(N)> pending{};
        int left = 0;
        for (int i = 0; i < N; ++i)
          if (at(level, i) == l && at(p.runs_vjp, i)) at(pending, i) = true, ++left;
        while (left > 0) {
          std::array<bool, size_t(N)> written{};
          at(p.bwd_begin, step) = pos;
          for (int i = N - 1; i >= 0; --i) {
            if (!at(pending, i)) continue;
            const Node& n = g[i];
            bool clash = false;
            for (int k = 0; k < n.n_in; ++k) clash |= at(written, n.in[size_t(k)]);
            if (clash) continue;
            for (int k = 0; k < n.n_in; ++k)
              if (at(p.needs_grad, n.in[size_t(k)])) at(written, n.in[size_t(k)]) = true;
            at(pending, i) = false;
            --left;
            at(p.bwd_order, pos++) = i;
            at(p.bwd_step, i) = step;
          }
          ++step;
        }
      }
    }
    p.n_bwd = step;
    at(p.bwd_begin, step) = pos;

    // Buffers and their lifetimes.
    const int F = p.n_fwd;
    const int t_end = F + p.n_bwd;  // past every step: outputs and leaf gradients live to here
    for (int i = 0; i < N; ++i) at(p.value_buf, i) = at(p.grad_buf, i) = at(p.scratch_buf, i) = -1;
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
      // Value. Inputs live in their own stores (set once, kept across steps), not in the arena.
      int start = n.kind == NodeKind::input ? 0 : at(p.fwd_step, i);
      int end = start;
      for (int c = i + 1; c < N; ++c) {
        const Node& cn = g[c];
        for (int k = 0; k < cn.n_in; ++k) {
          if (cn.in[size_t(k)] != i) continue;
          end = std::max(end, at(p.fwd_step, c));
          if (at(p.runs_vjp, c) && detail::reads(g, c, k)) end = std::max(end, F + at(p.bwd_step, c));
        }
      }
      if (at(p.runs_vjp, i) && (n.op->saves & kSaveOutput)) end = std::max(end, F + at(p.bwd_step, i));
      if (n.is_output) end = t_end;
      if (n.kind == NodeKind::op)
        at(p.value_buf, i) = add(BufKind::value, i, start, end, n.shape.numel(), n.dtype);
      // Scratch.
      if (n.kind == NodeKind::op && !(n.scratch == Dim(0))) {
        int s_end = at(p.runs_vjp, i) ? F + at(p.bwd_step, i) : start;
        at(p.scratch_buf, i) = add(BufKind::scratch, i, start, s_end, n.scratch, DType::real);
      }
      // Gradient.
      if (at(p.needs_grad, i)) {
        int g_start = t_end;
        if (is_seed(i)) g_start = F;
        for (int c = i + 1; c < N; ++c) {
          if (!at(p.runs_vjp, c)) continue;
          for (int k = 0; k < g[c].n_in; ++k)
            if (g[c].in[size_t(k)] == i) g_start = std::min(g_start, F + at(p.bwd_step, c));
        }
        int g_end = at(p.runs_vjp, i) ? F + at(p.bwd_step, i) : t_end;
        at(p.grad_buf, i) = add(BufKind::grad, i, g_start, g_end, n.shape.numel(), DType::real);
      }
    }
    detail::colour(p);

    // Zero each activation gradient just before its first contribution (seeds are written).
    pos = 0;
    for (int b = 0; b < p.n_bwd; ++b) {
      at(p.zero_begin, b) = pos;
      for (int i = 0; i < N; ++i) {
        int gb = at(p.grad_buf, i);
        if (gb >= 0 && !is_seed(i) && at(p.buffers, gb).start == F + b) at(p.zero_order, pos++) = i;
      }
    }
    at(p.zero_begin, p.n_bwd) = pos;
  }
  return p;
}

}  // namespace ctgrad
