// Runtime-facing types: views of tensors the executor owns, named parameters, options, errors.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ctgrad/graph/dim.hpp>

namespace ctgrad {

// A runtime shape does not fit what the graph declared: names the op or input and both shapes.
struct shape_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A non-owning view of a dense row-major tensor held by a Program.
template <class T>
struct TensorView {
  T* data = nullptr;
  std::array<std::int64_t, kMaxRank> dims{};
  int rank = 0;
  std::int64_t numel = 0;

  T& operator[](std::int64_t i) const { return data[i]; }
  std::span<T> span() const { return {data, static_cast<std::size_t>(numel)}; }
  std::span<const std::int64_t> shape() const { return {dims.data(), static_cast<std::size_t>(rank)}; }
  std::int64_t size(int i) const { return dims[static_cast<std::size_t>(i < 0 ? rank + i : i)]; }
};

// One entry of a model's parameter list: what optimizers and checkpoints see.
template <class T>
struct Parameter {
  std::string_view name;  // hierarchical, e.g. "enc.3.attn.wq"
  TensorView<T> value;
  TensorView<T> grad;
};

// Options with chained setters: Options().threads(2).seed(7).
struct Options {
  int threads_ = 0;  // 0: all cores
  std::uint64_t seed_ = 0;
  Options& threads(int n) {
    threads_ = n;
    return *this;
  }
  Options& seed(std::uint64_t s) {
    seed_ = s;
    return *this;
  }
  // Prepended to every parameter name ("layers.3" + "." + "fc1.weight"); init is keyed on the
  // full name, so instance 3 of a block starts where layer 3 of an unrolled model would.
  std::string prefix_;
  Options& prefix(std::string p) {
    prefix_ = std::move(p);
    return *this;
  }
};

enum class Mode { train, infer };  // infer: forward only, no activations kept for backward

std::string format_shape(std::span<const std::int64_t> dims);

}  // namespace ctgrad
