// Executor (executor.hpp): its hyperparameters, checked by the ops that read them, and the
// parameters' counter-based initialisation.
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/graph/executor_detail.hpp>

#include <bit>
#include <cmath>

#include <ctgrad/base/random.hpp>

namespace ctgrad {
using namespace executor_detail;

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

// These members of Executor<float> and Executor<double> (the class itself: executor.cpp).
#define CTGRAD_INSTANTIATE(T) \
  template int Executor<T>::find_hyper(std::string_view) const; \
  template double Executor<T>::hyper(std::string_view) const; \
  template double Executor<T>::resolve(const Real&) const; \
  template void Executor<T>::set_hyper(std::string_view, double); \
  template void Executor<T>::init_parameters(std::uint64_t);
CTGRAD_INSTANTIATE(float)
CTGRAD_INSTANTIATE(double)
#undef CTGRAD_INSTANTIATE

}  // namespace ctgrad
