#include <ctgrad/ops/random.hpp>
#include <ctgrad/graph/random.hpp>
#include <ctgrad/ops/detail/kernel.hpp>

namespace ctgrad {
namespace {
template <class T, class F>
void masked(const OpArgs& a, F f) {
  const double p = a.attr.f[0];
  const T scale = T(1.0 / (1.0 - p));
  const bool active = a.training && p > 0;
  const std::uint64_t key = random::key(a.seed, a.step, std::uint64_t(a.node));
  kernel::parallel(a.out.numel, kernel::grain_for(8), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) f(i, !active ? T(1) : random::uniform(key, std::uint64_t(i)) >= p ? scale : T(0));
  });
}
}  // namespace

template <class T>
void DropoutOp::forward(const OpArgs& a) {
  const T* x = a.in[0].as<T>();
  T* y = a.out.as<T>();
  masked<T>(a, [&](std::int64_t i, T m) { y[i] = x[i] * m; });
}
template <class T>
void DropoutOp::vjp(const OpArgs& a) {
  const T* g = a.gout->as<T>();
  T* gx = a.gin[0].as<T>();
  masked<T>(a, [&](std::int64_t i, T m) { gx[i] += g[i] * m; });
}

CTGRAD_INSTANTIATE_OP(DropoutOp)

}  // namespace ctgrad
