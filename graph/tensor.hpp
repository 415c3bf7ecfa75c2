// Runtime-facing types: views of tensors the executor owns, named parameters, options, errors.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

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

// A hyperparameter's name or value is refused (Program::set_hyper): names it and the op that refused.
struct hyper_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
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

// How a Program runs: Options{.threads = 2, .seed = 7, .hypers = {{"dropout", 0.1}}}.
struct Options {
  int threads = 0;  // 0: all cores
  // seed sets both random streams; init_seed / dropout_seed set one (parameter init; dropout masks).
  std::uint64_t seed = 0;
  std::optional<std::uint64_t> init_seed, dropout_seed;
  std::vector<std::pair<std::string, double>> hypers;  // set before the parameters are initialised
  // Prepended to every parameter name ("layers.3" + "." + "fc1.weight"); init is keyed on the
  // full name, so instance 3 of a block starts where layer 3 of an unrolled model would.
  std::string prefix;
  // Checking: fill each gradient that an op's VJP assigns (OpArgs::assign) with NaN first, so an
  // op that adds to it, or leaves elements unwritten, shows. Also on with CTGRAD_POISON_GRADIENTS=1.
  bool poison_assigned_gradients = false;
  // Measuring: time every op's forward and VJP (Executor::op_profile); two clock reads per op run.
  // Also on with CTGRAD_PROFILE_OPS=1.
  bool profile_ops = false;
};

enum class Mode { train, infer };  // infer: forward only, no activations kept for backward

std::string format_shape(std::span<const std::int64_t> dims);

// For "no X named 'name'" errors: " (did you mean 'closest'? <what>: 'a', 'b', ...)" — the closest
// known name by edit distance when it is close, then the known names (the first 20).
std::string suggest(std::string_view name, std::span<const std::string_view> known, const char* what);
// The closest of `known` to `name` by edit distance if it is close (a typo), else empty.
std::string_view closest_name(std::string_view name, std::span<const std::string_view> known);



}  // namespace ctgrad
