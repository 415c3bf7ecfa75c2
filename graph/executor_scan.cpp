// Executor (executor.hpp): scans (graph/scan.hpp). A scan's body is a graph with plans of its
// own (graph/scan_plan.hpp); this file lays its buffers out for L steps, runs its forward L
// times carrying the states, and backpropagates through time.
//
// Memory, one block per scan, sized when the dims are bound: a body slot whose tenant lives from
// forward to backward (a value a VJP reads, a new state) has one copy per step, every other slot
// one copy for all steps; with `recompute`, only the steps' results have a copy per step and
// backward runs each step's forward again before its VJPs. Then the sequences time-major (a
// step's slice is one block), the states after masking, zero starts, and the gradients passed
// from step to step. Nothing is allocated per step.
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/graph/executor_detail.hpp>
#include <ctgrad/graph/scan.hpp>

#include <cstring>
#include <limits>

namespace ctgrad {
using namespace executor_detail;

namespace {

template <class T>
std::size_t elem_size(DType dt) {
  return dt == DType::index ? sizeof(std::int32_t) : sizeof(T);
}

TensorRef shaped(const Node& n, const std::array<std::int64_t, kMaxSymbols>& sym) {
  TensorRef r;
  r.rank = n.shape.rank;
  r.dtype = n.dtype;
  r.numel = 1;
  for (int d = 0; d < n.shape.rank; ++d) {
    r.dim[std::size_t(d)] = n.shape[d].eval(sym);
    r.numel *= r.dim[std::size_t(d)];
  }
  return r;
}

// Lays out one scan's memory at the dims `sym` (see the top of the file); returns its bytes.
template <class T>
std::size_t lay_out(ScanRun<T>& r, const GraphView& g, const std::array<std::int64_t, kMaxSymbols>& sym) {
  const ScanInfo& sc = *r.info;
  const BodyView& body = *r.body;
  const Node& scan = g.nodes[sc.node];
  const Node& xs0 = g.nodes[scan.in[std::size_t(sc.xs_input[0])]];
  r.batch = xs0.shape[0].eval(sym);
  r.steps = xs0.shape[1].eval(sym);
  std::size_t total = 0;
  for (int pi = 0; pi < 2; ++pi) {
    const PlanView& p = pi == 0 ? body.train : body.infer;
    auto& lay = r.layout[pi];
    std::vector<std::size_t> bytes(std::size_t(p.n_slots), 0);
    lay.per_step.assign(std::size_t(p.n_slots), 0);
    const bool recompute = pi == 0 && sc.recompute;
    for (int b = 0; b < p.n_buffers; ++b) {
      const Buffer& buf = p.buffers[b];
      auto& s = bytes[std::size_t(buf.slot)];
      s = std::max(s, align_up(std::size_t(buf.elems.eval(sym)) * elem_size<T>(buf.dtype)));
      if (!recompute && buf.start < p.n_fwd && buf.end >= p.n_fwd) lay.per_step[std::size_t(buf.slot)] = 1;
    }
    if (recompute)  // the steps' results only (a result may live in the buffer of the value it overwrote)
      for (int j = 0; j < body.n; ++j)
        if (body.nodes[j].is_output && p.value_buf[j] >= 0) lay.per_step[std::size_t(p.buffers[p.value_buf[j]].slot)] = 1;
    lay.off.assign(std::size_t(p.n_slots), 0);
    lay.shared = lay.step = 0;
    for (std::size_t s = 0; s < bytes.size(); ++s) {
      std::size_t& part = lay.per_step[s] ? lay.step : lay.shared;
      lay.off[s] = part;
      part += bytes[s];
    }
    total = std::max(total, lay.shared + std::size_t(r.steps) * lay.step);
  }
  std::size_t at = align_up(total);
  auto region = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align_up(bytes);
    return here;
  };
  for (int j = 0; j < body.n; ++j) {
    if (r.step_of[std::size_t(j)] < 0) continue;
    const int k = r.step_of[std::size_t(j)];
    const TensorRef slice = shaped(body.nodes[j], sym);
    r.xs_stride[std::size_t(k)] = align_up(std::size_t(slice.numel) * elem_size<T>(slice.dtype));
    r.xs_off[std::size_t(k)] = region(r.xs_stride[std::size_t(k)] * std::size_t(r.steps));
  }
  if (sc.mask_input >= 0) r.mask_off = region(std::size_t(r.batch * r.steps) * sizeof(std::int32_t));
  for (int k = 0; k < sc.n_states; ++k) {
    const std::size_t state = std::size_t(shaped(g.nodes[sc.last[std::size_t(k)]], sym).numel) * sizeof(T);
    r.carry_stride[std::size_t(k)] = align_up(state);
    if (sc.mask_input >= 0) r.carry_off[std::size_t(k)] = region(r.carry_stride[std::size_t(k)] * std::size_t(r.steps));
    if (sc.init_input[std::size_t(k)] < 0) r.zero_off[std::size_t(k)] = region(state);
    r.carry_grad_off[std::size_t(k)] = region(state);
  }
  for (int k = 0; k < sc.n_outs; ++k) {
    const Node& seq = g.nodes[sc.seq[std::size_t(k)]];
    if (seq.dtype == DType::real) r.seq_grad_off[std::size_t(k)] = region(std::size_t(shaped(seq, sym).numel) * sizeof(T));
  }
  r.used = at;
  return at;
}

// A step's tensors of body node j: values, scratch and (in backward) gradients, in step t's
// block for per-step slots. prev[k]: state k before the step.
template <class T>
void bind_step(ScanRun<T>& r, int pi, std::int64_t t, const std::array<const void*, kMaxScanValues>& prev) {
  const BodyView& body = *r.body;
  const PlanView& p = pi == 0 ? body.train : body.infer;
  const auto& lay = r.layout[pi];
  std::byte* const base = r.mem.get();
  auto at = [&](int buf) -> void* {
    if (buf < 0) return nullptr;
    const auto slot = std::size_t(p.buffers[buf].slot);
    return base + (lay.per_step[slot] ? lay.shared + std::size_t(t) * lay.step : 0) + lay.off[slot];
  };
  for (int j = body.n_captures; j < body.n; ++j) {
    const auto ju = std::size_t(j);
    if (r.carry_of[ju] >= 0) {
      r.val[ju].data = const_cast<void*>(prev[std::size_t(r.carry_of[ju])]);
    } else if (r.step_of[ju] >= 0) {
      const auto k = std::size_t(r.step_of[ju]);
      r.val[ju].data = base + r.xs_off[k] + std::size_t(t) * r.xs_stride[k];
    } else {
      r.val[ju].data = p.view_of[j] >= 0 ? r.val[std::size_t(p.view_of[j])].data : at(p.value_buf[j]);
      r.scratch[ju].data = at(p.scratch_buf[j]);
    }
    r.grad[ju].data = pi == 0 ? at(p.grad_buf[j]) : nullptr;
  }
}

// The value of body node j at step t (a per-step slot: a step's result).
template <class T>
const std::byte* result_at(const ScanRun<T>& r, int j, std::int64_t t) {
  const PlanView& p = r.mode == 0 ? r.body->train : r.body->infer;
  const auto& lay = r.layout[r.mode];
  const auto slot = std::size_t(p.buffers[p.value_buf[j]].slot);
  return r.mem.get() + (lay.per_step[slot] ? lay.shared + std::size_t(t) * lay.step : 0) + lay.off[slot];
}

int body_id(const BodyView& body, int outer) {
  for (int j = body.n_captures; j < body.n; ++j)
    if (body.outer[j] == outer) return j;
  return -1;
}

}  // namespace

template <class T>
void Executor<T>::place_scans() {
  auto& runs = impl_->scans;
  if (runs.empty() && g_.n_scans > 0) {
    runs.resize(std::size_t(g_.n_scans));
    for (int s = 0; s < g_.n_scans; ++s) {
      ScanRun<T>& r = runs[std::size_t(s)];
      r.info = &g_.scans[s];
      r.body = &g_.bodies[s];
      const auto n = std::size_t(r.body->n);
      r.val.resize(n), r.grad.resize(n), r.scratch.resize(n);
      r.carry_of.assign(n, -1), r.step_of.assign(n, -1);
      for (int k = 0; k < r.info->n_states; ++k) r.carry_of[std::size_t(body_id(*r.body, r.info->carry[std::size_t(k)]))] = std::int8_t(k);
      for (int k = 0; k < r.info->n_xs; ++k) r.step_of[std::size_t(body_id(*r.body, r.info->step[std::size_t(k)]))] = std::int8_t(k);
    }
  }
  scan_bytes_ = 0;
  for (ScanRun<T>& r : runs) {
    const std::size_t need = lay_out(r, g_, sym_);
    if (need > r.mem_bytes) {
      r.mem = alloc_bytes(need);
      r.mem_bytes = need;
    }
    scan_bytes_ += r.mem_bytes;
    for (int j = 0; j < r.body->n; ++j) {
      const auto ju = std::size_t(j);
      r.val[ju] = shaped(r.body->nodes[j], sym_);
      r.grad[ju] = r.val[ju];
      r.grad[ju].dtype = DType::real;
      r.scratch[ju] = TensorRef{};
      if (!(r.body->nodes[j].scratch == Dim(0))) {
        r.scratch[ju].rank = 1;
        r.scratch[ju].numel = r.scratch[ju].dim[0] = r.body->nodes[j].scratch.eval(sym_);
      }
    }
    for (int k = 0; k < r.info->n_states; ++k)
      if (r.info->init_input[std::size_t(k)] < 0)
        std::memset(r.mem.get() + r.zero_off[std::size_t(k)], 0, r.carry_stride[std::size_t(k)]);
  }
}

template <class T>
std::optional<std::size_t> Executor<T>::scan_bytes_at(const std::array<std::int64_t, kMaxSymbols>& sym) const {
  std::size_t total = 0;
  for (int s = 0; s < g_.n_scans; ++s) {
    // In double first: a size past 2^60 bytes is no size.
    double approx = 0;
    const BodyView& body = g_.bodies[s];
    std::array<double, kMaxSymbols> dsym{};
    for (int k = 0; k < kMaxSymbols; ++k) dsym[std::size_t(k)] = double(sym[std::size_t(k)]);
    auto deval = [&](const Dim& d) {
      double v = double(d.coef);
      for (int k = 0; k < kMaxSymbols; ++k)
        for (int e = 0; e < d.exp[std::size_t(k)]; ++e) v *= dsym[std::size_t(k)];
      return v;
    };
    const Node& xs0 = g_.nodes[g_.nodes[g_.scans[s].node].in[std::size_t(g_.scans[s].xs_input[0])]];
    const double steps = deval(xs0.shape[1]);
    for (int b = 0; b < body.train.n_buffers; ++b) approx += (steps + 1) * deval(body.train.buffers[b].elems) * 8;
    for (int i = 0; i < g_.n; ++i)
      if (g_.nodes[i].region == g_.scans[s].region || i == g_.scans[s].node) approx += 4 * deval(g_.nodes[i].shape.numel()) * (steps + 1) * 8;
    if (!(approx < double(std::uint64_t(1) << 60))) return std::nullopt;
    ScanRun<T> r;
    r.info = &g_.scans[s];
    r.body = &body;
    r.carry_of.assign(std::size_t(body.n), -1), r.step_of.assign(std::size_t(body.n), -1);
    for (int k = 0; k < r.info->n_xs; ++k) r.step_of[std::size_t(body_id(body, r.info->step[std::size_t(k)]))] = std::int8_t(k);
    total += lay_out(r, g_, sym);
  }
  return total;
}

template <class T>
void Executor<T>::scan_forward(int node, Mode mode) {
  ScanRun<T>& r = impl_->scans[std::size_t(g_.nodes[node].attr.w[0])];
  const ScanInfo& sc = *r.info;
  const BodyView& body = *r.body;
  const Node& scan = g_.nodes[node];
  const int pi = mode == Mode::train ? 0 : 1;
  const PlanView& p = pi == 0 ? body.train : body.infer;
  r.mode = pi;
  r.have_seq_grad.fill(false);
  r.have_last_grad.fill(false);
  for (int j = 0; j < body.n_captures; ++j) {
    r.val[std::size_t(j)] = val_[std::size_t(body.outer[j])];
    r.grad[std::size_t(j)] = grad_[std::size_t(body.outer[j])];
  }
  const std::int64_t L = r.steps, B = r.batch;
  std::byte* const base = r.mem.get();
  // The sequences, time-major.
  for (int k = 0; k < sc.n_xs; ++k) {
    const TensorRef& x = val_[std::size_t(scan.in[std::size_t(sc.xs_input[std::size_t(k)])])];
    const std::size_t row = std::size_t(x.numel / (B * L)) * elem_size<T>(x.dtype);
    const auto* src = static_cast<const std::byte*>(x.data);
    std::byte* dst = base + r.xs_off[std::size_t(k)];
    for (std::int64_t t = 0; t < L; ++t)
      for (std::int64_t b = 0; b < B; ++b)
        std::memcpy(dst + std::size_t(t) * r.xs_stride[std::size_t(k)] + std::size_t(b) * row, src + std::size_t(b * L + t) * row, row);
  }
  const std::int32_t* mask = nullptr;
  if (sc.mask_input >= 0) {
    auto* copy = reinterpret_cast<std::int32_t*>(base + r.mask_off);
    std::memcpy(copy, val_[std::size_t(scan.in[std::size_t(sc.mask_input)])].data, std::size_t(B * L) * sizeof(std::int32_t));
    mask = copy;
  }
  std::array<const void*, kMaxScanValues> prev{};
  std::array<int, kMaxScanValues> state_out{};
  for (int k = 0; k < sc.n_states; ++k) {
    const int in = sc.init_input[std::size_t(k)];
    prev[std::size_t(k)] = in >= 0 ? val_[std::size_t(scan.in[std::size_t(in)])].data : base + r.zero_off[std::size_t(k)];
    state_out[std::size_t(k)] = body_id(body, sc.state_out[std::size_t(k)]);
  }
  for (std::int64_t s = 0; s < L; ++s) {
    const std::int64_t t = sc.reverse ? L - 1 - s : s;
    bind_step(r, pi, t, prev);
    const NodeSet set{body.nodes, r.val.data(), r.grad.data(), r.scratch.data(), body.outer, std::uint64_t(t + 1) << 32};
    for (int f = 0; f < p.n_fwd; ++f) run_nodes(p, set, p.fwd_order, p.fwd_begin[f], p.fwd_begin[f + 1], false);
    for (int k = 0; k < sc.n_states; ++k) {
      const void* out = r.val[std::size_t(state_out[std::size_t(k)])].data;
      if (!mask) {
        prev[std::size_t(k)] = out;
        continue;
      }
      // A row whose mask is 0 keeps its state.
      const std::size_t row = r.carry_stride[std::size_t(k)] > 0 ? std::size_t(r.val[std::size_t(state_out[std::size_t(k)])].numel / B) * sizeof(T) : 0;
      std::byte* dst = base + r.carry_off[std::size_t(k)] + std::size_t(t) * r.carry_stride[std::size_t(k)];
      for (std::int64_t b = 0; b < B; ++b)
        std::memcpy(dst + std::size_t(b) * row, static_cast<const std::byte*>(mask[b * L + t] ? out : prev[std::size_t(k)]) + std::size_t(b) * row, row);
      prev[std::size_t(k)] = dst;
    }
  }
  r.final_state = prev;
}

template <class T>
void Executor<T>::scan_result_forward(int node) {
  const Node& n = g_.nodes[node];
  const ScanRun<T>& r = impl_->scans[std::size_t(n.attr.w[0])];
  const ScanInfo& sc = *r.info;
  const int k = int(n.attr.w[2]);
  const TensorRef& out = val_[std::size_t(node)];
  if (n.attr.w[1] == 0) {  // a final state
    std::memcpy(out.data, r.final_state[std::size_t(k)], std::size_t(out.numel) * sizeof(T));
    return;
  }
  // Step output k of every step, [rows, L, ...] from each step's [rows, ...]; zeros where masked.
  const int j = body_id(*r.body, sc.out[std::size_t(k)]);
  const std::int64_t L = r.steps, rows = out.dim[0];
  const std::size_t row = std::size_t(out.numel / (rows * L)) * elem_size<T>(out.dtype);
  const std::int32_t* mask = sc.mask_input >= 0 ? reinterpret_cast<const std::int32_t*>(r.mem.get() + r.mask_off) : nullptr;
  auto* dst = static_cast<std::byte*>(out.data);
  for (std::int64_t t = 0; t < L; ++t) {
    const std::byte* src = result_at(r, j, t);
    for (std::int64_t b = 0; b < rows; ++b) {
      std::byte* d = dst + std::size_t(b * L + t) * row;
      if (mask && !mask[b * L + t]) std::memset(d, 0, row);
      else std::memcpy(d, src + std::size_t(b) * row, row);
    }
  }
}

template <class T>
void Executor<T>::scan_result_vjp(int node) {
  const Node& n = g_.nodes[node];
  ScanRun<T>& r = impl_->scans[std::size_t(n.attr.w[0])];
  const auto k = std::size_t(n.attr.w[2]);
  const TensorRef& g = grad_[std::size_t(node)];
  const bool last = n.attr.w[1] == 0;
  std::memcpy(r.mem.get() + (last ? r.carry_grad_off[k] : r.seq_grad_off[k]), g.data, std::size_t(g.numel) * sizeof(T));
  (last ? r.have_last_grad : r.have_seq_grad)[k] = true;
}

template <class T>
void Executor<T>::scan_backward(int node) {
  ScanRun<T>& r = impl_->scans[std::size_t(g_.nodes[node].attr.w[0])];
  const ScanInfo& sc = *r.info;
  const BodyView& body = *r.body;
  const Node& scan = g_.nodes[node];
  const PlanView& p = body.train;
  for (int j = 0; j < body.n_captures; ++j) {
    r.val[std::size_t(j)] = val_[std::size_t(body.outer[j])];
    r.grad[std::size_t(j)] = grad_[std::size_t(body.outer[j])];
  }
  const std::int64_t L = r.steps, B = r.batch;
  std::byte* const base = r.mem.get();
  const std::int32_t* mask = sc.mask_input >= 0 ? reinterpret_cast<const std::int32_t*>(base + r.mask_off) : nullptr;
  std::array<int, kMaxScanValues> state_out{}, carry{}, out{}, step{};
  std::array<std::size_t, kMaxScanValues> state_row{};  // bytes of a state's row
  for (int k = 0; k < sc.n_states; ++k) {
    state_out[std::size_t(k)] = body_id(body, sc.state_out[std::size_t(k)]);
    carry[std::size_t(k)] = body_id(body, sc.carry[std::size_t(k)]);
    state_row[std::size_t(k)] = std::size_t(r.val[std::size_t(carry[std::size_t(k)])].numel / B) * sizeof(T);
    // The gradient passed back from step to step starts as the final state's (or zeros).
    if (!r.have_last_grad[std::size_t(k)])
      std::memset(base + r.carry_grad_off[std::size_t(k)], 0, std::size_t(r.val[std::size_t(carry[std::size_t(k)])].numel) * sizeof(T));
  }
  for (int k = 0; k < sc.n_outs; ++k) out[std::size_t(k)] = body_id(body, sc.out[std::size_t(k)]);
  for (int k = 0; k < sc.n_xs; ++k) step[std::size_t(k)] = body_id(body, sc.step[std::size_t(k)]);
  // State k before step t: its start, or what the step before left (masked: the carried copy).
  auto prev_of = [&](std::int64_t t) {
    std::array<const void*, kMaxScanValues> prev{};
    const std::int64_t before = sc.reverse ? t + 1 : t - 1;
    for (int k = 0; k < sc.n_states; ++k) {
      const auto ku = std::size_t(k);
      if (before < 0 || before >= L) {
        const int in = sc.init_input[ku];
        prev[ku] = in >= 0 ? val_[std::size_t(scan.in[std::size_t(in)])].data : base + r.zero_off[ku];
      } else {
        prev[ku] = mask ? static_cast<const void*>(base + r.carry_off[ku] + std::size_t(before) * r.carry_stride[ku])
                        : static_cast<const void*>(result_at(r, state_out[ku], before));
      }
    }
    return prev;
  };
  auto add_rows = [&](T* dst, const T* src, std::int64_t rows, std::int64_t width, std::int64_t src_stride, std::int64_t t) {
    for (std::int64_t b = 0; b < rows; ++b) {
      if (mask && !mask[b * L + t]) continue;
      const T* s = src + b * src_stride;
      T* d = dst + b * width;
      for (std::int64_t e = 0; e < width; ++e) d[e] += s[e];
    }
  };
  for (std::int64_t s = L - 1; s >= 0; --s) {
    const std::int64_t t = sc.reverse ? L - 1 - s : s;
    bind_step(r, 0, t, prev_of(t));
    const NodeSet set{body.nodes, r.val.data(), r.grad.data(), r.scratch.data(), body.outer, std::uint64_t(t + 1) << 32};
    if (sc.recompute) {
      NodeSet again = set;
      again.replay = true;
      for (int f = 0; f < p.n_fwd; ++f) run_nodes(p, again, p.fwd_order, p.fwd_begin[f], p.fwd_begin[f + 1], false);
    }
    // Seeds: each result's gradient, from the next step (states) and from the stacked outputs.
    for (int j = body.n_captures; j < body.n; ++j)
      if (body.nodes[j].is_output && r.grad[std::size_t(j)].data)
        std::memset(r.grad[std::size_t(j)].data, 0, std::size_t(r.grad[std::size_t(j)].numel) * sizeof(T));
    for (int k = 0; k < sc.n_states; ++k) {
      const TensorRef& gs = r.grad[std::size_t(state_out[std::size_t(k)])];
      if (!gs.data) continue;
      const std::int64_t width = std::int64_t(state_row[std::size_t(k)] / sizeof(T));
      add_rows(gs.template as<T>(), reinterpret_cast<const T*>(base + r.carry_grad_off[std::size_t(k)]), B, width, width, t);
    }
    for (int k = 0; k < sc.n_outs; ++k) {
      const TensorRef& go = r.grad[std::size_t(out[std::size_t(k)])];
      if (!go.data || !r.have_seq_grad[std::size_t(k)]) continue;
      const std::int64_t rows = go.dim[0], width = go.numel / rows;
      add_rows(go.template as<T>(), reinterpret_cast<const T*>(base + r.seq_grad_off[std::size_t(k)]) + t * width, rows, width, L * width, t);
    }
    for (int b = 0; b < p.n_bwd; ++b) {
      zero_step_gradients(p, r.grad.data(), b);
      run_nodes(p, set, p.bwd_order, p.bwd_begin[b], p.bwd_begin[b + 1], true);
    }
    // The state's gradient before this step: through the body, or straight on for a masked row.
    for (int k = 0; k < sc.n_states; ++k) {
      const auto ku = std::size_t(k);
      T* cg = reinterpret_cast<T*>(base + r.carry_grad_off[ku]);
      const T* body_grad = r.grad[std::size_t(carry[ku])].template as<T>();
      const std::int64_t width = std::int64_t(state_row[ku] / sizeof(T));
      for (std::int64_t b = 0; b < B; ++b) {
        if (mask && !mask[b * L + t]) continue;
        if (body_grad) std::memcpy(cg + b * width, body_grad + b * width, state_row[ku]);
        else std::memset(cg + b * width, 0, state_row[ku]);
      }
    }
    // The sequences' gradients at t.
    for (int k = 0; k < sc.n_xs; ++k) {
      const TensorRef& gx = grad_[std::size_t(scan.in[std::size_t(sc.xs_input[std::size_t(k)])])];
      const TensorRef& gs = r.grad[std::size_t(step[std::size_t(k)])];
      if (!gx.data || !gs.data) continue;
      const std::int64_t width = gs.numel / B;
      T* dst = gx.template as<T>();
      const T* src = gs.template as<T>();
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t e = 0; e < width; ++e) dst[(b * L + t) * width + e] += src[b * width + e];
    }
  }
  for (int k = 0; k < sc.n_states; ++k) {
    const int in = sc.init_input[std::size_t(k)];
    if (in < 0) continue;
    const TensorRef& gi = grad_[std::size_t(scan.in[std::size_t(in)])];
    if (!gi.data) continue;
    const T* cg = reinterpret_cast<const T*>(base + r.carry_grad_off[std::size_t(k)]);
    T* d = gi.template as<T>();
    for (std::int64_t e = 0; e < gi.numel; ++e) d[e] += cg[e];
  }
}

#define CTGRAD_INSTANTIATE(T) \
  template void Executor<T>::place_scans(); \
  template std::optional<std::size_t> Executor<T>::scan_bytes_at(const std::array<std::int64_t, kMaxSymbols>&) const; \
  template void Executor<T>::scan_forward(int, Mode); \
  template void Executor<T>::scan_backward(int); \
  template void Executor<T>::scan_result_forward(int); \
  template void Executor<T>::scan_result_vjp(int);
CTGRAD_INSTANTIATE(float)
CTGRAD_INSTANTIATE(double)
#undef CTGRAD_INSTANTIATE

}  // namespace ctgrad
