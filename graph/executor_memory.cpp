// Executor (executor.hpp): the arena's layout at the bound dims, and what a plan needs.
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/graph/executor_detail.hpp>

#include <optional>

namespace ctgrad {
using namespace executor_detail;

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
  const auto scans = scan_bytes_at(sym);  // each scan's memory (graph/executor_scan.cpp)
  if (!scans || __builtin_add_overflow(total, std::uint64_t(*scans), &total)) return std::nullopt;
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
  return total_[m == Mode::train ? 0 : 1] + scan_bytes_;
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
    place_scans();
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

// These members of Executor<float> and Executor<double> (the class itself: executor.cpp).
#define CTGRAD_INSTANTIATE(T) \
  template void Executor<T>::layout(const PlanView&, std::vector<std::size_t>&, std::size_t&) const; \
  template std::optional<std::size_t> Executor<T>::plan_bytes_at(Mode, const std::array<std::int64_t, kMaxSymbols>&) const; \
  template std::size_t Executor<T>::plan_bytes(Mode) const; \
  template void Executor<T>::place(Mode);
CTGRAD_INSTANTIATE(float)
CTGRAD_INSTANTIATE(double)
#undef CTGRAD_INSTANTIATE

}  // namespace ctgrad
