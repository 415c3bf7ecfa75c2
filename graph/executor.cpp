// Executor (executor.hpp): construction, the steps of a plan run forward and backward, the
// outputs and gradients, the op profile. Its inputs, arena and hyperparameters: executor_inputs.cpp,
// executor_memory.cpp, executor_values.cpp.
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/graph/executor_detail.hpp>
#include <ctgrad/graph/scan.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cmath>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <sys/mman.h>
#include <new>

namespace ctgrad {

std::string format_shape(std::span<const std::int64_t> dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

using namespace executor_detail;

void AlignedFree::operator()(void* p) const noexcept { ::operator delete[](p, std::align_val_t(align)); }

template <class T>
Executor<T>::Executor(GraphView g, PlanView train, PlanView infer, Options opts)
    : g_(g), plan_{train, infer}, opts_(opts), dropout_seed_(opts.dropout_seed.value_or(opts.seed)),
      impl_(std::make_unique<Impl>(opts.threads)) {
  const char* poison = std::getenv("CTGRAD_POISON_GRADIENTS");
  poison_ = opts.poison_assigned_gradients || (poison && *poison && std::string_view(poison) != "0");
  const char* profile = std::getenv("CTGRAD_PROFILE_OPS");
  profile_ = opts.profile_ops || (profile && *profile && std::string_view(profile) != "0");
  if (profile_) clocks_.resize(static_cast<std::size_t>(g_.n));
  std::size_t n = static_cast<std::size_t>(g_.n);
  // Hyperparameters at their defaults, and every node's options as the ops will read them.
  hyper_index_.assign(n, -1);
  attrs_.resize(n);
  for (int i = 0; i < g_.n; ++i) {
    attrs_[std::size_t(i)] = g_.nodes[i].attr;
    if (g_.nodes[i].kind != NodeKind::hyper) continue;
    const double v = g_.nodes[i].hyper_default();
    hyper_index_[std::size_t(i)] = int(hypers_.size());
    hypers_.push_back({g_.name(i), v, v});
  }
  param_index_.assign(n, -1);
  inputs_.resize(n);
  seeds_.resize(n);
  val_.resize(n);
  grad_.resize(n);
  scratch_.resize(n);
  // Parameter store: one block for values, one for gradients, each tensor 64-byte aligned.
  std::vector<std::size_t> offs;
  for (int i = 0; i < g_.n; ++i) {
    if (g_.nodes[i].kind != NodeKind::param) continue;
    offs.push_back(param_total_);
    auto elems = static_cast<std::size_t>(g_.nodes[i].shape.numel().coef);
    param_total_ += align_up(elems * sizeof(T)) / sizeof(T);
  }
  param_values_ = aligned_array<T>(param_total_);
  param_grads_ = aligned_array<T>(param_total_);
  std::fill_n(param_values_.get(), param_total_, T(0));
  std::fill_n(param_grads_.get(), param_total_, T(0));
  for (int i = 0; i < g_.n; ++i)
    if (g_.nodes[i].kind == NodeKind::param)
      param_names_.push_back(opts_.prefix.empty() ? std::string(g_.name(i)) : opts_.prefix + "." + std::string(g_.name(i)));
  std::size_t k = 0;
  for (int i = 0; i < g_.n; ++i) {
    if (g_.nodes[i].kind != NodeKind::param) continue;
    param_index_[static_cast<std::size_t>(i)] = int(params_.size());
    TensorRef r = ref(i, param_values_.get() + offs[k]);
    TensorView<T> v{r.as<T>(), r.dim, r.rank, r.numel};
    TensorView<T> gr = v;
    gr.data = param_grads_.get() + offs[k];
    params_.push_back({param_names_[k], v, gr});
    val_[static_cast<std::size_t>(i)] = r;
    TensorRef rg = r;
    rg.data = gr.data;
    grad_[static_cast<std::size_t>(i)] = rg;
    ++k;
  }
  for (const auto& [name, value] : opts_.hypers) set_hyper(name, value);
  init_parameters(opts_.init_seed.value_or(opts_.seed));
}

template <class T>
Executor<T>::~Executor() = default;

template <class T>
int Executor<T>::threads() const {
  return impl_->arena.max_concurrency();
}

template <class T>
void Executor<T>::execute(const std::function<void()>& f) {
  impl_->arena.execute(f);
}

template <class T>
std::int64_t Executor<T>::symbol(Dim s) const {
  for (int i = 0; i < kMaxSymbols; ++i)
    if (s == ctgrad::symbol(i)) return sym_[static_cast<std::size_t>(i)] > 0 ? sym_[static_cast<std::size_t>(i)] : -1;
  return -1;
}

template <class T>
TensorRef Executor<T>::ref(int node, void* data) const {
  const Node& n = g_.nodes[node];
  TensorRef r;
  r.data = data;
  r.rank = n.shape.rank;
  r.dtype = n.dtype;
  r.numel = 1;
  for (int d = 0; d < n.shape.rank; ++d) {
    r.dim[static_cast<std::size_t>(d)] = n.shape[d].eval(sym_);
    r.numel *= r.dim[static_cast<std::size_t>(d)];
  }
  return r;
}

template <class T>
void Executor<T>::run_step(const PlanView& p, const int* order, int begin, int end, bool vjp) {
  run_nodes(p, NodeSet{g_.nodes, val_.data(), grad_.data(), scratch_.data()}, order, begin, end, vjp);
}

template <class T>
void Executor<T>::run_nodes(const PlanView& p, const NodeSet& set, const int* order, int begin, int end, bool vjp) {
  constexpr int ti = std::is_same_v<T, double> ? 1 : 0;
  auto run = [&](int i) {
    if (vjp && p.vjp_skip[i]) return;  // a view whose source's gradient is its own buffer
    const Node& n = set.nodes[i];
    const int id = set.outer ? set.outer[i] : i;  // the model's node
    if (!set.outer && (n.op == &op_def<ScanOp> || n.op == &op_def<ScanResultOp>)) {  // run here, not by kernels
      if (n.op == &op_def<ScanOp>) vjp ? scan_backward(i) : scan_forward(i, placed_mode_);
      else vjp ? scan_result_vjp(i) : scan_result_forward(i);
      return;
    }
    std::array<TensorRef, kMaxInputs> in, gin;
    const int n_in = std::min(n.n_in, kMaxInputs);  // always n.n_in; tells the compiler the bound
    for (int k = 0; k < n_in; ++k) {
      int src = n.in[static_cast<std::size_t>(k)];
      in[static_cast<std::size_t>(k)] = set.val[src];
      gin[static_cast<std::size_t>(k)] = vjp && p.needs_grad[src] ? set.grad[src] : TensorRef{};
    }
    // A VJP, or a recomputed step's forward, runs with the options the forward ran with.
    const AttrWords& attrs = ((vjp || set.replay) && impl_->forward_attrs_kept ? impl_->forward_attrs : attrs_)[static_cast<std::size_t>(id)];
    OpArgs a{attrs, in.data(), n.n_in, set.val[i], set.scratch[i]};
    a.seed = dropout_seed_;
    a.shard = shard_;

    a.step = static_cast<std::uint64_t>(vjp || set.replay ? step_ - 1 : step_);  // forward() counts after running
    a.node = set.tag | static_cast<std::uint64_t>(id);
    a.training = placed_mode_ == Mode::train;
    if (vjp) {
      a.gout = &set.grad[i];
      a.gin = gin.data();
      a.assign_mask = p.assigns[i];
    }
    const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (vjp) n.op->vjp[ti](a);
    else n.op->forward[ti](a);
    if (profile_) {  // one task per node: no other thread writes this node's clock
      NodeClock& c = clocks_[static_cast<std::size_t>(id)];
      c.ns[vjp] += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
      ++c.runs[vjp];
    }
  };
  if (end - begin == 1) {
    run(order[begin]);
  } else {
    tbb::parallel_for(tbb::blocked_range<int>(begin, end, 1), [&](const tbb::blocked_range<int>& r) {
      for (int j = r.begin(); j != r.end(); ++j) run(order[j]);
    });
  }
}

template <class T>
std::vector<OpTime> Executor<T>::op_profile() const {
  std::vector<OpTime> out;
  for (std::size_t i = 0; i < clocks_.size(); ++i) {
    const NodeClock& c = clocks_[i];
    if (c.runs[0] + c.runs[1] == 0) continue;
    const Node& n = g_.nodes[i];
    out.push_back({g_.name(int(i)), n.op->name, double(c.ns[0]) * 1e-9, double(c.ns[1]) * 1e-9, c.runs[0], c.runs[1]});
  }
  return out;
}

template <class T>
void Executor<T>::reset_op_profile() {
  for (NodeClock& c : clocks_) c = NodeClock{};
}

template <class T>
void Executor<T>::forward(Mode mode) {
  have_forward_ = false;  // stays false if this forward throws
  impl_->forward_attrs_kept = false;  // this forward runs with the current values
  check_inputs();
  place(mode);
  const PlanView& p = plan_[mode == Mode::train ? 0 : 1];
  impl_->arena.execute([&] {
    for (int s = 0; s < p.n_fwd; ++s) run_step(p, p.fwd_order, p.fwd_begin[s], p.fwd_begin[s + 1], false);
  });
  if (mode == Mode::train) ++step_;  // the RNG step counts training forwards only: validation (split over ranks or not) draws nothing
  have_forward_ = true;
  last_mode_ = mode;
}

template <class T>
std::vector<int> Executor<T>::gradient_ready_steps() const {
  const PlanView& p = plan_[0];
  std::vector<int> ready(params_.size(), -1);
  for (int b = 0; b < p.n_bwd; ++b)
    for (int k = p.bwd_begin[b]; k < p.bwd_begin[b + 1]; ++k) {
      const Node& n = g_.nodes[p.bwd_order[k]];
      for (int j = 0; j < n.n_in; ++j) {
        const int src = n.in[static_cast<std::size_t>(j)];
        const int pi = param_index_[static_cast<std::size_t>(src)];
        if (pi >= 0 && p.needs_grad[src]) ready[static_cast<std::size_t>(pi)] = b;  // its last writer so far
      }
    }
  return ready;
}

template <class T>
void Executor<T>::backward() {
  if (!have_forward_ || last_mode_ != Mode::train)
    throw std::logic_error("ctgrad: backward() needs a forward(Mode::train) first");
  const PlanView& p = plan_[0];
  if (g_.loss >= 0) {
    T* seed = grad_[static_cast<std::size_t>(g_.loss)].template as<T>();
    if (!seed)
      throw std::logic_error("ctgrad: backward(): nothing to differentiate: no parameter or input declared "
                             "In{.grad = true} reaches the loss");
    *seed = T(1);
  } else {
    for (int i = 0; i < g_.n; ++i) {
      const TensorRef& gr = grad_[static_cast<std::size_t>(i)];
      if (!g_.nodes[i].is_output || !gr.data) continue;
      const InputStore& st = seeds_[static_cast<std::size_t>(i)];
      const Node& n = g_.nodes[i];
      std::string name(g_.str(n.out_name_off, n.out_name_len));
      if (st.rank < 0)
        throw std::logic_error("ctgrad: backward(): the graph has no loss and output '" + name +
                               "' has no gradient (call set_output_grad)");
      if (st.rank != gr.rank || !std::equal(gr.dim.begin(), gr.dim.begin() + gr.rank, st.dims.begin()))
        throw shape_error("ctgrad: backward(): gradient of output '" + name + "' has shape " +
                          format_shape({st.dims.data(), std::size_t(st.rank)}) + ", the output has " +
                          format_shape({gr.dim.data(), std::size_t(gr.rank)}));
      const T* src = reinterpret_cast<const T*>(st.data.get());
      T* dst = gr.template as<T>();
      if (n.kind == NodeKind::param)  // a parameter's gradient accumulates until zero_grad()
        for (std::int64_t e = 0; e < gr.numel; ++e) dst[e] += src[e];
      else
        std::memcpy(dst, src, static_cast<std::size_t>(gr.numel) * sizeof(T));
    }
  }
  impl_->arena.execute([&] {
    for (int b = 0; b < p.n_bwd; ++b) {
      zero_step_gradients(p, grad_.data(), b);
      run_step(p, p.bwd_order, p.bwd_begin[b], p.bwd_begin[b + 1], true);
      if (backward_hook_) backward_hook_(b);
    }
  });
  have_forward_ = false;  // activations may be overwritten by now
}

// The gradients made ready before backward step b: zeroed, or poisoned where their first
// contributor assigns them (Options::poison_assigned_gradients).
template <class T>
void Executor<T>::zero_step_gradients(const PlanView& p, const TensorRef* grad, int b) {
  for (int z = p.zero_begin[b]; z < p.zero_begin[b + 1]; ++z) {
    const TensorRef& r = grad[p.zero_order[z]];
    if (p.grad_fresh[p.zero_order[z]]) {  // its first contributor assigns it
      if (poison_) std::fill_n(r.template as<T>(), r.numel, std::numeric_limits<T>::quiet_NaN());
      continue;
    }
    constexpr std::int64_t kChunk = std::int64_t(1) << 16;  // large buffers on every thread
    if (r.numel <= kChunk) {
      std::memset(r.data, 0, static_cast<std::size_t>(r.numel) * sizeof(T));
      continue;
    }
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, r.numel, kChunk), [&](const tbb::blocked_range<std::int64_t>& c) {
      std::memset(r.template as<T>() + c.begin(), 0, static_cast<std::size_t>(c.size()) * sizeof(T));
    });
  }
}

template <class T>
void Executor<T>::set_output_grad(std::string_view output, std::span<const T> grad) {
  int i = find_output(output);
  if (!placed_) throw std::logic_error("ctgrad: set_output_grad('" + std::string(output) + "') before forward()");
  const TensorRef& v = val_[static_cast<std::size_t>(i)];
  if (static_cast<std::int64_t>(grad.size()) != v.numel)
    throw shape_error("ctgrad: set_output_grad('" + std::string(output) + "'): " + std::to_string(grad.size()) +
                      " values for an output of shape " + format_shape({v.dim.data(), std::size_t(v.rank)}));
  InputStore& st = seeds_[static_cast<std::size_t>(i)];
  if (st.capacity < grad.size_bytes()) {
    st.data = alloc_bytes(align_up(grad.size_bytes()));
    st.capacity = align_up(grad.size_bytes());
  }
  std::memcpy(st.data.get(), grad.data(), grad.size_bytes());
  st.rank = v.rank;
  st.dims = v.dim;
}

template <class T>
void Executor<T>::zero_grad() {
  // On the program's threads: one thread fills at about half the memory's speed (GPT medium's
  // 93 MB took 4.7 ms).
  T* g = param_grads_.get();
  impl_->arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, param_total_, std::size_t(1) << 16),
                      [&](const tbb::blocked_range<std::size_t>& r) { std::fill(g + r.begin(), g + r.end(), T(0)); });
  });
}

template <class T>
TensorView<T> Executor<T>::output(std::string_view name) const {
  int i = find_output(name);
  if (!placed_) throw std::logic_error("ctgrad: output('" + std::string(name) + "') before any forward()");
  if (g_.nodes[i].dtype != DType::real)
    throw std::logic_error("ctgrad: output '" + std::string(name) + "' holds int32 indices, not real values");
  const TensorRef& r = val_[static_cast<std::size_t>(i)];
  return {r.as<T>(), r.dim, r.rank, r.numel};
}

template <class T>
TensorView<const std::int32_t> Executor<T>::index_output(std::string_view name) const {
  int i = find_output(name);
  if (!placed_) throw std::logic_error("ctgrad: index_output('" + std::string(name) + "') before any forward()");
  if (g_.nodes[i].dtype != DType::index)
    throw std::logic_error("ctgrad: output '" + std::string(name) + "' holds real values: read it with output()");
  const TensorRef& r = val_[static_cast<std::size_t>(i)];
  return {r.as<const std::int32_t>(), r.dim, r.rank, r.numel};
}

template <class T>
T Executor<T>::loss() const {

  if (g_.loss < 0) throw std::logic_error("ctgrad: the graph has no loss");
  if (!placed_) throw std::logic_error("ctgrad: loss() before any forward()");
  return *val_[static_cast<std::size_t>(g_.loss)].template as<T>();
}

template <class T>
TensorView<T> Executor<T>::input_grad(std::string_view name) const {
  int i = find_input(name);
  const TensorRef& r = grad_[static_cast<std::size_t>(i)];
  if (!r.data) throw std::logic_error("ctgrad: input '" + std::string(name) + "' has no gradient (declare it In{.grad = true})");
  return {r.as<T>(), r.dim, r.rank, r.numel};
}

template <class T>
TensorView<T> Executor<T>::input_data(std::string_view name) {
  int i = find_input(name);
  const InputStore& st = inputs_[static_cast<std::size_t>(i)];
  if (st.rank < 0) throw std::logic_error("ctgrad: input '" + std::string(name) + "' was never set");
  if (g_.nodes[i].dtype != DType::real) throw std::logic_error("ctgrad: input '" + std::string(name) + "' holds indices");
  TensorView<T> v{reinterpret_cast<T*>(st.data.get()), st.dims, st.rank, 1};
  for (int d = 0; d < st.rank; ++d) v.numel *= st.dims[static_cast<std::size_t>(d)];
  return v;
}

template <class T>
std::vector<std::string_view> Executor<T>::grad_inputs() const {
  std::vector<std::string_view> r;
  for (int i = 0; i < g_.n; ++i)
    if (g_.nodes[i].kind == NodeKind::input && g_.nodes[i].requires_grad) r.push_back(g_.name(i));
  return r;
}

template <class T>
std::int64_t Executor<T>::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& p : params_) n += p.value.numel;
  return n;
}

template <class T>
std::int64_t Executor<T>::embedding_parameter_count() const {
  std::vector<std::string_view> tables;
  for (int i = 0; i < g_.n; ++i) {
    const Node& node = g_.nodes[i];
    if (node.kind != NodeKind::op || !node.op || node.n_in < 1) continue;
    const std::string_view op = node.op->name;
    if ((op == "embedding" || op == "prefix_rows") && g_.nodes[node.in[0]].kind == NodeKind::param) tables.push_back(g_.name(node.in[0]));
  }
  std::int64_t n = 0;
  for (const auto& p : params_)
    if (std::any_of(tables.begin(), tables.end(), [&](std::string_view t) { return p.name.size() >= t.size() && p.name.substr(p.name.size() - t.size()) == t; }))
      n += p.value.numel;
  return n;
}

template <class T>
const Parameter<T>& Executor<T>::parameter(std::string_view name) const {
  std::vector<std::string_view> known;
  for (const auto& p : params_) {
    if (p.name == name) return p;
    known.push_back(p.name);
  }
  throw std::invalid_argument("ctgrad: no parameter named '" + std::string(name) + "'" + suggest(name, known, "parameters"));
}

std::string format_op_profile(std::span<const OpTime> times, std::int64_t steps, int rows) {
  struct Row {
    std::string_view op;
    double forward_s = 0, vjp_s = 0;
    std::int64_t nodes = 0;
  };
  std::vector<Row> by_op;
  double total = 0;
  for (const OpTime& t : times) {
    auto it = std::find_if(by_op.begin(), by_op.end(), [&](const Row& r) { return r.op == t.op; });
    if (it == by_op.end()) it = by_op.insert(by_op.end(), Row{t.op});
    it->forward_s += t.forward_s, it->vjp_s += t.vjp_s, ++it->nodes;
    total += t.forward_s + t.vjp_s;
  }
  std::stable_sort(by_op.begin(), by_op.end(), [](const Row& a, const Row& b) { return a.forward_s + a.vjp_s > b.forward_s + b.vjp_s; });
  const double scale = 1e3 / double(steps > 0 ? steps : 1);
  std::string out = std::string("op                      nodes  forward ms  vjp ms    share") + (steps > 0 ? "  (per step)\n" : "\n");
  char line[160];
  int shown = 0;
  for (const Row& r : by_op) {
    if (shown++ == rows) break;
    std::snprintf(line, sizeof line, "%-22.*s %6lld %11.3f %9.3f %7.1f%%\n", int(r.op.size()), r.op.data(), static_cast<long long>(r.nodes),
                  r.forward_s * scale, r.vjp_s * scale, total > 0 ? 100.0 * (r.forward_s + r.vjp_s) / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-22s %6zu %21.3f ms in ops\n", "total", times.size(), total * scale);
  return out + line;
}

template class Executor<float>;
template class Executor<double>;

}  // namespace ctgrad
