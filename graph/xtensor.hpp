// xtensor interop: view a Program's tensors as xtensor expressions (no copy) and set inputs from
// xtensor containers. Separate from the core headers, which stay light to compile.
#pragma once
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>

#include <ctgrad/graph/executor.hpp>

namespace ctgrad {

// A non-owning xtensor view of a tensor the Program holds (output, parameter value or gradient).
template <class T>
auto as_xtensor(const TensorView<T>& v) {
  std::vector<std::size_t> shape(v.shape().begin(), v.shape().end());
  return xt::adapt(v.data, static_cast<std::size_t>(v.numel), xt::no_ownership(), shape);
}

// Copies a row-major xtensor container into a real input; its shape binds the runtime dims.
template <class T, class E>
void set_input(Executor<T>& p, std::string_view name, const xt::xexpression<E>& e) {
  const auto& x = e.derived_cast();
  xt::xarray<T, xt::layout_type::row_major> dense = x;  // evaluates views, fixes the layout
  std::array<std::int64_t, kMaxRank> dims{};
  if (dense.dimension() > std::size_t(kMaxRank))
    throw shape_error("ctgrad: input '" + std::string(name) + "' has rank " + std::to_string(dense.dimension()) +
                      ", more than " + std::to_string(kMaxRank));
  for (std::size_t i = 0; i < dense.dimension(); ++i) dims[i] = static_cast<std::int64_t>(dense.shape()[i]);
  p.set_input(name, std::span<const T>(dense.data(), dense.size()),
              std::span<const std::int64_t>(dims.data(), dense.dimension()));
}

}  // namespace ctgrad
