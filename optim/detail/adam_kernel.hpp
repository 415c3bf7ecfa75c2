// The body of Adam's update (adam.hpp), for the translation unit of one instruction set, which
// defines CTGRAD_SIMD_ISA (a namespace name) first: every function here then lives in that unit's
// own namespace, so the linker never takes one set's copy for another's.
#pragma once
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include <ctgrad/optim/detail/adam.hpp>

#ifndef CTGRAD_SIMD_ISA
#error "define CTGRAD_SIMD_ISA (a namespace name) before including adam_kernel.hpp"
#endif

namespace ctgrad::optim::detail::CTGRAD_SIMD_ISA {

// Arch void: scalars alone.
template <class Arch, class T>
void adam(T* w, const T* g, T* m, T* v, std::int64_t n, const AdamStep& s) {
  constexpr bool scalar = std::is_void_v<Arch>;
  using B = std::conditional_t<scalar, T, xsimd::batch<T, std::conditional_t<scalar, xsimd::sse2, Arch>>>;
  constexpr std::int64_t W = scalar ? 1 : std::int64_t(sizeof(B) / sizeof(T));
  const T shrink = T(s.shrink), wd = T(s.weight_decay), b1 = T(s.beta1), b2 = T(s.beta2), step = T(s.step), sq = T(s.sqrt_bc2),
          eps = T(s.eps);
  const bool decoupled = s.decoupled;
  // One body for batches and the scalar tail: the same operations in the same order.
  auto update = [&](auto wi, auto gi, auto mi, auto vi, auto one, auto& wo, auto& mo, auto& vo) {
    using V = decltype(wi);
    if (decoupled) wi = wi * V(shrink);
    else gi = gi + V(wd) * wi;
    mo = V(b1) * mi + (one - V(b1)) * gi;
    vo = V(b2) * vi + (one - V(b2)) * gi * gi;
    wo = wi - V(step) * mo / (xsimd::sqrt(vo) / V(sq) + V(eps));
  };
  std::int64_t i = 0;
  if constexpr (!scalar)
    for (; i + W <= n; i += W) {
      B wo, mo, vo;
      update(B::load_unaligned(w + i), B::load_unaligned(g + i), B::load_unaligned(m + i), B::load_unaligned(v + i), B(T(1)), wo, mo, vo);
      wo.store_unaligned(w + i), mo.store_unaligned(m + i), vo.store_unaligned(v + i);
    }
  for (; i < n; ++i) {
    T wo, mo, vo;
    update(w[i], g[i], m[i], v[i], T(1), wo, mo, vo);
    w[i] = wo, m[i] = mo, v[i] = vo;
  }
}

template <class Arch>
AdamKernels kernels() {
  return {&adam<Arch, float>, &adam<Arch, double>};
}

}  // namespace ctgrad::optim::detail::CTGRAD_SIMD_ISA
