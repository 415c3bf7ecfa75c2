#include <ctgrad/ops/linear.hpp>
#include <ctgrad/ops/detail/gemm.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/simd.hpp>

namespace ctgrad {
namespace {

// y[rows, out] = x W^T + bias on every row.
template <class T>
void affine(std::int64_t rows, std::int64_t in, std::int64_t out, const T* x, const T* w, const T* b, T* y) {
  kernel::gemm_bias(false, true, rows, out, in, x, in, w, in, b, y, out);
}

// dx += G W, dW += G^T x, db += column sums of G; each written (=) instead when its bit of
// `assign` is set (1: dx, 2: dW, 4: db).
template <class T>
void affine_vjp(std::int64_t rows, std::int64_t in, std::int64_t out, const T* x, const T* w, const T* g, T* gx, T* gw, T* gb,
                unsigned assign = 0) {
  const kernel::Bf16OperandReuse reuse;  // G is read by both products
  if (gx) kernel::gemm(false, false, rows, in, out, g, out, w, in, gx, in, !(assign & 1u));
  if (gw) kernel::gemm(true, false, out, in, rows, g, out, x, in, gw, in, !(assign & 2u));
  if (gb) {  // row blocks on every CPU (columns in chunks of 64 gave a 128-wide bias 2 tasks)
    const auto add = simd::best().axpy[std::is_same_v<T, double>];
    T* const sums[1] = {gb};
    kernel::rows_with_column_sums<T>(rows, out, 1, sums, (assign >> 2) & 1u,
                                     [&](std::int64_t r, T* acc) { add(g + r * out, nullptr, acc, out, 1.0, false); });
  }
}

struct Patches {
  std::int64_t B, C, H, W, p, ph, pw, n, cpp;
};
Patches patches_of(const OpArgs& a) {
  const TensorRef& x = a.in[0];
  Patches s{x.size(0), x.size(1), x.size(2), x.size(3), a.attrs<PatchEmbedOp>().patch, 0, 0, 0, 0};
  s.ph = s.H / s.p, s.pw = s.W / s.p, s.n = s.ph * s.pw, s.cpp = s.C * s.p * s.p;
  return s;
}

// For each (image, patch, c, i): `f(patch row, image offset)` over the p contiguous pixels.
template <class F>
void for_patch_rows(const Patches& s, F f) {
  kernel::parallel(s.B * s.n, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t q = b0; q < b1; ++q) {
      const std::int64_t img = q / s.n, py = (q % s.n) / s.pw, px = q % s.pw;
      for (std::int64_t c = 0; c < s.C; ++c)
        for (std::int64_t i = 0; i < s.p; ++i)
          f(q * s.cpp + (c * s.p + i) * s.p, ((img * s.C + c) * s.H + py * s.p + i) * s.W + px * s.p);
    }
  });
}

}  // namespace

template <class T>
void LinearOp::forward(const OpArgs& a) {
  const std::int64_t in = a.in[0].size(-1), out = a.out.size(-1), rows = a.in[0].rows();
  affine(rows, in, out, a.in[0].as<T>(), a.in[1].as<T>(), a.in[2].as<T>(), a.out.as<T>());
}
template <class T>
void LinearOp::vjp(const OpArgs& a) {
  const std::int64_t in = a.in[0].size(-1), out = a.out.size(-1), rows = a.in[0].rows();
  affine_vjp(rows, in, out, a.in[0].as<T>(), a.in[1].as<T>(), a.gout->as<T>(), a.gin[0].as<T>(), a.gin[1].as<T>(),
             a.gin[2].as<T>(), a.assign_mask);
}

template <class T>
void PatchEmbedOp::forward(const OpArgs& a) {
  const Patches s = patches_of(a);
  const T* x = a.in[0].as<T>();
  T* cols = a.scratch.as<T>();  // [B*n, C*p*p]
  for_patch_rows(s, [&](std::int64_t dst, std::int64_t src) { std::memcpy(cols + dst, x + src, std::size_t(s.p) * sizeof(T)); });
  affine(s.B * s.n, s.cpp, a.out.size(-1), cols, a.in[1].as<T>(), a.in[2].as<T>(), a.out.as<T>());
}
template <class T>
void PatchEmbedOp::vjp(const OpArgs& a) {
  const Patches s = patches_of(a);
  T* cols = a.scratch.as<T>();
  T* dcols = cols + s.B * s.n * s.cpp;
  T* gx = a.gin[0].as<T>();
  if (gx) std::fill(dcols, dcols + s.B * s.n * s.cpp, T(0));
  affine_vjp(s.B * s.n, s.cpp, a.out.size(-1), cols, a.in[1].as<T>(), a.gout->as<T>(), gx ? dcols : static_cast<T*>(nullptr),
             a.gin[1].as<T>(), a.gin[2].as<T>());
  if (gx)  // patches do not overlap: each pixel gets exactly one patch entry
    for_patch_rows(s, [&](std::int64_t src, std::int64_t dst) {
      for (std::int64_t j = 0; j < s.p; ++j) gx[dst + j] += dcols[src + j];
    });
}

CTGRAD_INSTANTIATE_OP(LinearOp)
CTGRAD_INSTANTIATE_OP(PatchEmbedOp)

}  // namespace ctgrad
