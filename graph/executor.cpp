#include <ctgrad/graph/executor.hpp>
#include <ctgrad/base/random.hpp>

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

namespace {
constexpr std::size_t kAlign = 64;
constexpr std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

template <class T>
std::size_t elem_bytes(DType dt) {
  return dt == DType::index ? sizeof(std::int32_t) : sizeof(T);
}

}  // namespace

// 64-byte aligned blocks. Blocks of 2 MB and more (parameters, gradients, the activation arena)
// start on a 2 MB boundary and ask the kernel for transparent huge pages: a GEMM's packing reads
// rows of an operand last touched long before, and with 4 KB pages each row can be a TLB miss
// (GPT medium's GEMMs 4-6% faster in its steps; docs/performance.md). The advice changes nothing
// where the host's THP mode is `never` or its kernel has none.
void AlignedFree::operator()(void* p) const noexcept { ::operator delete[](p, std::align_val_t(align)); }

template <class U>
AlignedArray<U> aligned_array(std::size_t n) {
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  n = std::max<std::size_t>(n, 1);
  if (n > (std::numeric_limits<std::size_t>::max() - kHuge) / sizeof(U)) throw std::bad_alloc();
  const std::size_t bytes = n * sizeof(U), align = bytes >= kHuge ? kHuge : kAlign;
  const std::size_t rounded = (bytes + align - 1) / align * align;  // whole huge pages for the advice
  void* p = ::operator new[](rounded, std::align_val_t(align));
#ifdef MADV_HUGEPAGE
  if (align == kHuge) ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return AlignedArray<U>(static_cast<U*>(p), AlignedFree{align});
}

namespace {
AlignedArray<std::byte> alloc_bytes(std::size_t n) { return aligned_array<std::byte>(n); }

std::string declared(const Shape& s) { return std::string(Msg().add(s).view()); }
}  // namespace

template <class T>
struct Executor<T>::Impl {
  tbb::task_arena arena;
  // The options the last training forward ran with, kept when set_hyper changes one before its
  // backward: the VJPs must see what the forward saw (dropout regenerates its mask from its rate).
  std::vector<AttrWords> forward_attrs;
  bool forward_attrs_kept = false;
  explicit Impl(int threads) : arena(threads > 0 ? threads : tbb::info::default_concurrency()) {}
};

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
int Executor<T>::find_hyper(std::string_view name) const {
  for (std::size_t h = 0; h < hypers_.size(); ++h)
    if (hypers_[h].name == name) return int(h);
  std::vector<std::string_view> known;
  for (const Hyper& h : hypers_) known.push_back(h.name);
  throw hyper_error("ctgrad: no hyperparameter named '" + std::string(name) + "'" + suggest(name, known, "hyperparameters"));
}

template <class T>
double Executor<T>::hyper(std::string_view name) const {
  return hypers_[std::size_t(find_hyper(name))].value;
}

template <class T>
double Executor<T>::resolve(const Real& r) const {
  if (r.hyper < 0) return r.value;
  const int h = hyper_index_[std::size_t(r.hyper)];
  return h >= 0 ? hypers_[std::size_t(h)].value : r.value;
}

template <class T>
void Executor<T>::set_hyper(std::string_view name, double value) {
  const int h = find_hyper(name);
  const std::string what = "ctgrad: hyperparameter '" + std::string(name) + "' = " + std::string(Msg().add_number(value).view());
  if (!std::isfinite(value)) throw hyper_error(what + ": not a finite number");
  int node = -1;
  for (int i = 0; i < g_.n; ++i)
    if (hyper_index_[std::size_t(i)] == h) node = i;
  // Every op that reads it checks the new value with its shape rule, before anything changes.
  std::vector<AttrWords> next(attrs_.size());
  std::vector<int> touched;
  for (int i = 0; i < g_.n; ++i) {
    const Node& n = g_.nodes[i];
    AttrWords w = attrs_[std::size_t(i)];
    bool uses = false;
    for (int k = 0; k + 1 < w.n; ++k)
      if ((w.real_at >> k & 1u) && std::int64_t(n.attr.w[std::size_t(k + 1)]) - 1 == node) {
        w.w[std::size_t(k)] = std::bit_cast<std::uint64_t>(value);
        uses = true;
      }
    if (!uses) continue;
    if (n.kind == NodeKind::op) {
      std::array<Shape, kMaxInputs> shapes{};
      std::array<DType, kMaxInputs> dtypes{};
      for (int k = 0; k < n.n_in; ++k) {
        shapes[std::size_t(k)] = g_.nodes[n.in[std::size_t(k)]].shape;
        dtypes[std::size_t(k)] = g_.nodes[n.in[std::size_t(k)]].dtype;
      }
      const ShapeResult r = n.op->shape(ShapeCtx{shapes.data(), dtypes.data(), n.n_in, w});
      if (!r.error.empty()) {
        std::string where = "op " + std::string(n.op->name);
        if (n.name_len) where += " in '" + std::string(g_.name(i)) + "'";
        throw hyper_error(what + ": " + where + " (" + std::string(g_.str(n.file_off, n.file_len)) + ":" +
                                    std::to_string(n.line) + "): " + std::string(r.error.view()));
      }
    }
    next[std::size_t(i)] = w;
    touched.push_back(i);
  }
  if (have_forward_ && last_mode_ == Mode::train && !impl_->forward_attrs_kept) {  // a backward may follow
    impl_->forward_attrs = attrs_;
    impl_->forward_attrs_kept = true;
  }
  for (int i : touched) attrs_[std::size_t(i)] = next[std::size_t(i)];
  hypers_[std::size_t(h)].value = value;
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
void Executor<T>::init_parameters(std::uint64_t seed) {
  for (int node = 0; node < g_.n; ++node) {
    if (g_.nodes[node].kind != NodeKind::param) continue;
    const Parameter<T>& p = params_[static_cast<std::size_t>(param_index_[static_cast<std::size_t>(node)])];
    const Node& n = g_.nodes[node];
    const std::uint64_t key = random::key(seed, p.name);
    const Init& in = n.init;
    const double ia = resolve(in.a) * in.scale, ib = resolve(in.b) * in.scale;
    double fan_in = n.shape.rank >= 1 ? double(n.shape.back(1).coef) : 1.0;
    double fan_out = n.shape.rank >= 2 ? double(n.shape.back(2).coef) : 1.0;
    for (std::int64_t e = 0; e < p.value.numel; ++e) {
      double v = 0;
      switch (in.kind) {
        case Init::zeros: v = 0; break;
        case Init::ones: v = 1; break;
        case Init::constant: v = ia; break;
        case Init::normal: v = ia * random::normal(key, std::uint64_t(e)); break;
        case Init::truncated_normal: {
          double z = random::normal(key, std::uint64_t(e));
          for (std::uint64_t redraw = 1; std::abs(z) > 2; ++redraw) z = random::normal(key, std::uint64_t(e) + (redraw << 40));
          v = ia * z;
          break;
        }
        case Init::uniform: v = ia + (ib - ia) * random::uniform(key, std::uint64_t(e)); break;
        case Init::xavier_uniform: {
          double a = ia * std::sqrt(6.0 / (fan_in + fan_out));
          v = -a + 2 * a * random::uniform(key, std::uint64_t(e));
          break;
        }
      }
      p.value.data[e] = static_cast<T>(v);
    }
  }
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
int Executor<T>::find_input(std::string_view name) const {
  for (int i = 0; i < g_.n; ++i)
    if (g_.nodes[i].kind == NodeKind::input && g_.name(i) == name) return i;
  std::vector<std::string_view> known;
  for (int i = 0; i < g_.n; ++i)
    if (g_.nodes[i].kind == NodeKind::input) known.push_back(g_.name(i));
  throw std::invalid_argument("ctgrad: no input named '" + std::string(name) + "'" + suggest(name, known, "inputs"));
}

template <class T>
int Executor<T>::find_output(std::string_view name) const {
  std::vector<std::string_view> known;
  for (int i = 0; i < g_.n; ++i) {
    const Node& n = g_.nodes[i];
    if (!n.is_output) continue;
    if (g_.str(n.out_name_off, n.out_name_len) == name) return i;
    known.push_back(g_.str(n.out_name_off, n.out_name_len));
  }
  throw std::invalid_argument("ctgrad: no output named '" + std::string(name) + "'" + suggest(name, known, "outputs"));
}

template <class T>
void Executor<T>::fail_input(int node, const std::string& why) const {
  std::string msg = "ctgrad: input '" + std::string(g_.name(node)) + "': " + why;
  for (int c = node + 1; c < g_.n; ++c) {
    const Node& cn = g_.nodes[c];
    bool uses = false;
    for (int k = 0; k < cn.n_in; ++k) uses |= cn.in[static_cast<std::size_t>(k)] == node;
    if (uses && cn.kind == NodeKind::op) {
      msg += " (used by op " + std::string(cn.op->name);
      if (cn.name_len) msg += " in '" + std::string(g_.name(c)) + "'";
      msg += " at " + std::string(g_.str(cn.file_off, cn.file_len)) + ":" + std::to_string(cn.line) + ")";
      break;
    }
  }
  throw shape_error(msg);
}

template <class T>
void Executor<T>::copy_input(int node, const void* data, std::size_t bytes,
                             std::span<const std::int64_t> shape, DType dt) {
  const Node& n = g_.nodes[node];
  std::string got = format_shape(shape);
  if (dt != n.dtype)
    fail_input(node, std::string("expects ") + (n.dtype == DType::index ? "int32 indices" : "real values") +
                         ", got " + (dt == DType::index ? "int32 indices" : "real values"));
  if (int(shape.size()) != n.shape.rank)
    fail_input(node, "shape " + got + " has rank " + std::to_string(shape.size()) + ", declared " +
                         declared(n.shape) + " has rank " + std::to_string(n.shape.rank));
  std::int64_t numel = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) fail_input(node, "shape " + got + " has an empty or negative dim");
    const Dim& want = n.shape[int(d)];
    if (want.is_static() && want.coef != shape[d])
      fail_input(node, "shape " + got + " does not fit declared " + declared(n.shape) + ": dim " +
                           std::to_string(d) + " must be " + std::to_string(want.coef));
    numel *= shape[d];
  }
  std::size_t need = static_cast<std::size_t>(numel) * (dt == DType::index ? 4 : sizeof(T));
  if (need != bytes)
    fail_input(node, "shape " + got + " needs " + std::to_string(numel) + " elements, data has " +
                         std::to_string(bytes / (dt == DType::index ? 4 : sizeof(T))));
  InputStore& st = inputs_[static_cast<std::size_t>(node)];
  have_forward_ = false;  // the saved activations no longer match the inputs
  if (st.capacity < need) {
    st.data = alloc_bytes(align_up(need));
    st.capacity = align_up(need);
  }
  std::memcpy(st.data.get(), data, need);
  st.rank = int(shape.size());
  std::copy(shape.begin(), shape.end(), st.dims.begin());
}

template <class T>
void Executor<T>::set_input(std::string_view name, std::span<const T> data,
                            std::span<const std::int64_t> shape) {
  copy_input(find_input(name), data.data(), data.size_bytes(), shape, DType::real);
}

template <class T>
void Executor<T>::set_input(std::string_view name, std::span<const std::int32_t> data,
                            std::span<const std::int64_t> shape) {
  copy_input(find_input(name), data.data(), data.size_bytes(), shape, DType::index);
}

// Binds each runtime symbol from the first input that carries it alone in a dim, then checks
// every input against its declared shape under those values.
template <class T>
void Executor<T>::check_inputs() {
  std::array<int, kMaxSymbols> bound_by{};
  bound_by.fill(-1);
  std::array<std::int64_t, kMaxSymbols> sym{};
  for (int i = 0; i < g_.n; ++i) {
    const Node& n = g_.nodes[i];
    if (n.kind != NodeKind::input) continue;
    const InputStore& st = inputs_[static_cast<std::size_t>(i)];
    if (st.rank < 0) fail_input(i, "was never set (call set_input before forward)");
    for (int d = 0; d < n.shape.rank; ++d) {
      const Dim& want = n.shape[d];
      for (int s = 0; s < kMaxSymbols; ++s) {
        if (!(want == ctgrad::symbol(s))) continue;
        auto su = static_cast<std::size_t>(s);
        std::int64_t got = st.dims[static_cast<std::size_t>(d)];
        if (bound_by[su] < 0) {
          bound_by[su] = i;
          sym[su] = got;
        } else if (sym[su] != got) {
          const InputStore& other = inputs_[static_cast<std::size_t>(bound_by[su])];
          fail_input(i, "shape " + format_shape({st.dims.data(), std::size_t(st.rank)}) + " gives " +
                            std::string(kSymbolNames[su]) + "=" + std::to_string(got) + ", but input '" +
                            std::string(g_.name(bound_by[su])) + "' " +
                            format_shape({other.dims.data(), std::size_t(other.rank)}) + " gives " +
                            std::string(kSymbolNames[su]) + "=" + std::to_string(sym[su]));
        }
      }
    }
  }
  for (int i = 0; i < g_.n; ++i) {
    const Node& n = g_.nodes[i];
    if (n.kind != NodeKind::input) continue;
    const InputStore& st = inputs_[static_cast<std::size_t>(i)];
    for (int d = 0; d < n.shape.rank; ++d) {
      std::int64_t want = n.shape[d].eval(sym);
      if (want != st.dims[static_cast<std::size_t>(d)])
        fail_input(i, "shape " + format_shape({st.dims.data(), std::size_t(st.rank)}) + " does not fit " +
                          declared(n.shape) + ": dim " + std::to_string(d) + " should be " +
                          std::to_string(want));
    }
  }
  for (int s = 0; s < kMaxSymbols; ++s) {
    auto su = static_cast<std::size_t>(s);
    if (bound_by[su] >= 0) sym_[su] = sym[su];
  }
}

template <class T>
void Executor<T>::layout(const PlanView& p, std::vector<std::size_t>& offsets, std::size_t& total) const {
  std::vector<std::size_t> bytes(static_cast<std::size_t>(p.n_slots), 0);
  for (int b = 0; b < p.n_buffers; ++b) {
    const Buffer& buf = p.buffers[b];
    auto need = static_cast<std::size_t>(buf.elems.eval(sym_)) * elem_bytes<T>(buf.dtype);
    auto& s = bytes[static_cast<std::size_t>(buf.slot)];
    s = std::max(s, align_up(need));
  }
  offsets.assign(bytes.size(), 0);
  total = 0;
  for (std::size_t s = 0; s < bytes.size(); ++s) {
    offsets[s] = total;
    total += bytes[s];
  }
}

template <class T>
std::optional<std::size_t> Executor<T>::plan_bytes_at(Mode m, const std::array<std::int64_t, kMaxSymbols>& sym) const {
  const PlanView& p = plan_[m == Mode::train ? 0 : 1];
  auto eval = [&](const Dim& d) -> std::optional<std::uint64_t> {
    std::uint64_t v = std::uint64_t(d.coef);
    for (int s = 0; s < kMaxSymbols; ++s)
      for (int e = 0; e < d.exp[std::size_t(s)]; ++e)
        if (sym[std::size_t(s)] < 0 || __builtin_mul_overflow(v, std::uint64_t(sym[std::size_t(s)]), &v)) return std::nullopt;
    return v;
  };
  std::vector<std::uint64_t> slot(static_cast<std::size_t>(p.n_slots), 0);
  for (int b = 0; b < p.n_buffers; ++b) {
    const Buffer& buf = p.buffers[b];
    auto elems = eval(buf.elems);
    std::uint64_t bytes = 0;
    if (!elems || __builtin_mul_overflow(*elems, std::uint64_t(elem_bytes<T>(buf.dtype)), &bytes)) return std::nullopt;
    auto& s = slot[static_cast<std::size_t>(buf.slot)];
    s = std::max(s, bytes);
  }
  std::uint64_t total = 0;
  for (auto s : slot)
    if (__builtin_add_overflow(total, s, &total)) return std::nullopt;
  // The inputs live beside the arena, in their own stores.
  for (int i = 0; i < g_.n; ++i) {
    const Node& n = g_.nodes[i];
    if (n.kind != NodeKind::input) continue;
    auto elems = eval(n.shape.numel());
    std::uint64_t bytes = 0;
    if (!elems || __builtin_mul_overflow(*elems, std::uint64_t(elem_bytes<T>(n.dtype)), &bytes) || __builtin_add_overflow(total, bytes, &total))
      return std::nullopt;
  }
  return std::size_t(total);
}

template <class T>
std::size_t Executor<T>::plan_bytes(Mode m) const {
  return total_[m == Mode::train ? 0 : 1];
}

template <class T>
void Executor<T>::place(Mode m) {
  bool resized = !sized_ || sym_ != sized_for_;
  if (resized) {
    layout(plan_[0], offsets_[0], total_[0]);
    layout(plan_[1], offsets_[1], total_[1]);
    std::size_t need = std::max({total_[0], total_[1], kAlign});
    if (need > arena_bytes_) {
      arena_ = alloc_bytes(need);
      arena_bytes_ = need;
    }
    sized_for_ = sym_;
    sized_ = true;
  }
  if (!resized && placed_ && placed_mode_ == m) {
    // Inputs may have moved to a bigger store since the last step (and views of them with them).
    const PlanView& p = plan_[m == Mode::train ? 0 : 1];
    for (int i = 0; i < g_.n; ++i) {
      const auto iu = static_cast<std::size_t>(i);
      if (g_.nodes[i].kind == NodeKind::input) val_[iu].data = inputs_[iu].data.get();
      else if (p.view_of[i] >= 0) val_[iu].data = val_[static_cast<std::size_t>(p.view_of[i])].data;
    }
    return;
  }
  const int pi = m == Mode::train ? 0 : 1;
  const PlanView& p = plan_[pi];
  auto at = [&](int buf) -> void* {
    if (buf < 0) return nullptr;
    return arena_.get() + offsets_[pi][static_cast<std::size_t>(p.buffers[buf].slot)];
  };
  for (int i = 0; i < g_.n; ++i) {
    auto iu = static_cast<std::size_t>(i);
    const Node& n = g_.nodes[i];
    if (n.kind == NodeKind::param) continue;
    void* v = n.kind == NodeKind::input ? static_cast<void*>(inputs_[iu].data.get())
              : p.view_of[i] >= 0        ? val_[static_cast<std::size_t>(p.view_of[i])].data  // placed before: an earlier node
                                         : at(p.value_buf[i]);
    val_[iu] = ref(i, v);
    grad_[iu] = ref(i, at(p.grad_buf[i]));
    grad_[iu].dtype = DType::real;
    scratch_[iu] = TensorRef{};
    if (p.scratch_buf[i] >= 0) {
      scratch_[iu].data = at(p.scratch_buf[i]);
      scratch_[iu].rank = 1;
      scratch_[iu].numel = n.scratch.eval(sym_);
      scratch_[iu].dim[0] = scratch_[iu].numel;
    }
  }
  placed_ = true;
  placed_mode_ = m;
}

template <class T>
void Executor<T>::run_step(const PlanView& p, const int* order, int begin, int end, bool vjp) {
  constexpr int ti = std::is_same_v<T, double> ? 1 : 0;
  auto run = [&](int i) {
    if (vjp && p.vjp_skip[i]) return;  // a view whose source's gradient is its own buffer
    const Node& n = g_.nodes[i];
    std::array<TensorRef, kMaxInputs> in{}, gin{};
    const int n_in = std::min(n.n_in, kMaxInputs);  // always n.n_in; tells the compiler the bound
    for (int k = 0; k < n_in; ++k) {
      int src = n.in[static_cast<std::size_t>(k)];
      in[static_cast<std::size_t>(k)] = val_[static_cast<std::size_t>(src)];
      if (vjp && p.needs_grad[src]) gin[static_cast<std::size_t>(k)] = grad_[static_cast<std::size_t>(src)];
    }
    const AttrWords& attrs = (vjp && impl_->forward_attrs_kept ? impl_->forward_attrs : attrs_)[static_cast<std::size_t>(i)];
    OpArgs a{attrs, in.data(), n.n_in, val_[static_cast<std::size_t>(i)], scratch_[static_cast<std::size_t>(i)]};
    a.seed = dropout_seed_;
    a.shard = shard_;

    a.step = static_cast<std::uint64_t>(vjp ? step_ - 1 : step_);  // forward() counts after running
    a.node = i;
    a.training = placed_mode_ == Mode::train;
    if (vjp) {
      a.gout = &grad_[static_cast<std::size_t>(i)];
      a.gin = gin.data();
      a.assign_mask = p.assigns[i];
    }
    const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (vjp) n.op->vjp[ti](a);
    else n.op->forward[ti](a);
    if (profile_) {  // one task per node: no other thread writes this node's clock
      NodeClock& c = clocks_[static_cast<std::size_t>(i)];
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
      for (int z = p.zero_begin[b]; z < p.zero_begin[b + 1]; ++z) {
        const TensorRef& r = grad_[static_cast<std::size_t>(p.zero_order[z])];
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
      run_step(p, p.bwd_order, p.bwd_begin[b], p.bwd_begin[b + 1], true);
      if (backward_hook_) backward_hook_(b);
    }
  });
  have_forward_ = false;  // activations may be overwritten by now
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
