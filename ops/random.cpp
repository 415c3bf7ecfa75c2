#include <ctgrad/ops/random.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/shared_gradient.hpp>
#include <ctgrad/ops/detail/simd.hpp>

#include <cstring>
#include <stdexcept>


namespace ctgrad {
namespace {
bool active(const OpArgs& a) { return a.training && a.attrs<DropoutOp>().p > 0; }

template <class T, class F>
void masked(const OpArgs& a, F f) {
  const double p = a.attrs<DropoutOp>().p;
  const T scale = T(1.0 / (1.0 - p));
  const std::uint64_t key = random::key(a.seed, a.step, std::uint64_t(a.node));
  const std::uint64_t first = a.shard * std::uint64_t(a.out.numel);  // this shard's elements of the global batch
  kernel::parallel(a.out.numel, kernel::grain_for(8), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) f(i, random::uniform(key, first + std::uint64_t(i)) >= p ? scale : T(0));
  });
}
}  // namespace

// Inactive (inference, or p = 0 from a hyperparameter): a copy, or nothing when planned in place;
// the gradient passes through (nothing to do when the plan shares the two gradients). Active,
// y[i] = x[i] * m[i] reads x[i] before writing y[i], and the VJP likewise: in place is safe.
template <class T>
void DropoutOp::forward(const OpArgs& a) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  if (!active(a)) {
    if (y == x) return;  // planned in place (DropoutOp::in_place)
    kernel::parallel(a.out.numel, 1 << 16, [&](std::int64_t b, std::int64_t e) { std::memcpy(y + b, x + b, std::size_t(e - b) * sizeof(T)); });
    return;
  }
  masked<T>(a, [&](std::int64_t i, T m) { y[i] = x[i] * m; });
}
template <class T>
void DropoutOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  const bool shared = kernel::shared_gradient(a, 0);  // DropoutOp::shares_grad
  if (!active(a)) {
    if (shared) return;
    const auto axpy = simd::best().axpy[std::is_same_v<T, double>];
    kernel::parallel(a.out.numel, 1 << 15, [&](std::int64_t b, std::int64_t e) { axpy(g + b, nullptr, gx + b, e - b, 1.0, a.assign(0)); });
    return;
  }
  if (a.assign(0))
    masked<T>(a, [&](std::int64_t i, T m) { gx[i] = g[i] * m; });
  else
    masked<T>(a, [&](std::int64_t i, T m) { gx[i] += g[i] * m; });
}

CTGRAD_INSTANTIATE_OP(DropoutOp)

}  // namespace ctgrad
