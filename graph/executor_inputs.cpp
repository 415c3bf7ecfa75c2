// Executor (executor.hpp): its inputs, found by name, checked against their declared shapes and
// binding the runtime symbols.
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/graph/executor_detail.hpp>

#include <cstring>
#include <stdexcept>

namespace ctgrad {
using namespace executor_detail;

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

// Binds each runtime symbol from the first input that carries it alone in a dim (a derived one:
// from those), then checks every input against its declared shape under those values.
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
  for (int s = 0; s < kMaxSymbols; ++s)
    if (g_.derived[s].active()) {
      sym[std::size_t(s)] = g_.derived[s].eval(sym);
      bound_by[std::size_t(s)] = g_.n;  // (not an input's)
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

// These members of Executor<float> and Executor<double> (the class itself: executor.cpp).
#define CTGRAD_INSTANTIATE(T) \
  template int Executor<T>::find_input(std::string_view) const; \
  template int Executor<T>::find_output(std::string_view) const; \
  template void Executor<T>::fail_input(int, const std::string&) const; \
  template void Executor<T>::copy_input(int, const void*, std::size_t, std::span<const std::int64_t>, DType); \
  template void Executor<T>::set_input(std::string_view, std::span<const T>, std::span<const std::int64_t>); \
  template void Executor<T>::set_input(std::string_view, std::span<const std::int32_t>, std::span<const std::int64_t>); \
  template void Executor<T>::check_inputs();
CTGRAD_INSTANTIATE(float)
CTGRAD_INSTANTIATE(double)
#undef CTGRAD_INSTANTIATE

}  // namespace ctgrad
