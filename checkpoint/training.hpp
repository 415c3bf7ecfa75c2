// Training checkpoints: a model's parameters (under their own names, so other tools read them as
// they are), the optimizer's state ("optim.<param>.<slot>"), and in the metadata the optimizer
// step, the RNG seed and step, and whatever the caller adds (config, tokenizer file). Loading checks that
// the file holds exactly the model's tensors with the same shapes and dtypes, and names the first
// that differs; resuming continues the run bit for bit. The checksum of metadata and data is
// required ("ctgrad-training-2"); files of the first format, which had none, load with a warning.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/optim/optimizer.hpp>

namespace ctgrad::checkpoint {

inline constexpr const char* kTrainingFormat = "ctgrad-training-2";

// Checks that `f` is a training checkpoint this version reads: a known format, and the checksum
// that format requires (so deleting it from the metadata does not switch the check off).
inline void check_training_file(const File& f) {
  const std::string where = "ctgrad: checkpoint " + f.path().string();
  const auto format = f.metadata().find("format");
  if (format == f.metadata().end()) throw format_error(where + ": no 'format' in its metadata: not a ctgrad training checkpoint");
  if (format->second == kTrainingFormat) {
    if (!f.checksummed()) throw format_error(where + ": no checksum in its metadata: the file is damaged");
  } else if (format->second == "ctgrad-training-1" && !f.checksummed()) {
    std::fprintf(stderr, "warning: %s is of the first checkpoint format, without a checksum: damage to it cannot be detected "
                         "(the next save writes the current format)\n", f.path().c_str());
  } else {
    throw format_error(where + ": format '" + format->second.substr(0, 40) + "' is not one this version reads (" + kTrainingFormat + ")");
  }
}

template <class T>
void save_training(const std::filesystem::path& path, const Executor<T>& model, const optim::Optimizer<T>* opt,
                   Metadata metadata = {}) {
  std::vector<TensorView> tensors;
  for (const auto& p : model.parameters())
    tensors.push_back(view_of<T>(std::string(p.name), std::span<const T>(p.value.span()),
                                 std::vector<std::int64_t>(p.value.shape().begin(), p.value.shape().end())));
  if (opt)
    for (const auto& s : const_cast<optim::Optimizer<T>*>(opt)->state())
      tensors.push_back(view_of<T>("optim." + s.name, std::span<const T>(s.data), {std::int64_t(s.data.size())}));
  metadata["format"] = kTrainingFormat;
  metadata["rng_step"] = std::to_string(model.steps());
  metadata["rng_seed"] = std::to_string(model.seed());
  if (opt) metadata["optimizer_step"] = std::to_string(opt->steps());
  save(path, tensors, metadata);
}

// Returns the file's metadata (config, tokenizer, ...).
template <class T>
Metadata load_training(const std::filesystem::path& path, Executor<T>& model, optim::Optimizer<T>* opt) {
  const File f(path);
  check_training_file(f);
  const std::string where = "ctgrad: checkpoint " + path.string();
  std::size_t expected = 0;
  for (const auto& p : model.parameters()) {
    ++expected;
    if (!f.has(std::string(p.name)))
      throw format_error(where + ": no tensor '" + std::string(p.name) + "' for the model's parameter of that name (a checkpoint of another model?)");
    f.read<T>(std::string(p.name), p.value.span(), p.value.shape());
  }
  if (opt) {
    for (auto& s : opt->state()) {
      ++expected;
      const std::int64_t n = std::int64_t(s.data.size());
      f.read<T>("optim." + s.name, std::span<T>(s.data), std::span<const std::int64_t>(&n, 1));
    }
  }
  for (const std::string& name : f.names()) {
    bool known = name.rfind("optim.", 0) == 0 ? opt != nullptr : false;
    if (!known)
      for (const auto& p : model.parameters()) known |= p.name == name;
    if (!known) throw format_error(where + ": holds tensor '" + name + "' that this model does not have (a checkpoint of another model or config?)");
  }
  if (f.names().size() != expected)
    throw format_error(where + ": holds " + std::to_string(f.names().size()) + " tensors, the model and optimizer expect " + std::to_string(expected));
  const Metadata& m = f.metadata();
  // Numbers in the metadata: decimal digits only ("-1" or "12abc" is damage, not a step).
  auto number = [&](const char* key) -> std::uint64_t {
    auto it = m.find(key);
    if (it == m.end()) throw format_error(where + ": metadata has no '" + key + "'");
    const std::string& v = it->second;
    std::uint64_t x = 0;
    const bool digits = !v.empty() && v.size() <= 19 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) throw format_error(where + ": metadata '" + key + "' is not a count: '" + v.substr(0, 40) + "'");
    for (char c : v) x = x * 10 + std::uint64_t(c - '0');
    return x;
  };
  // Weights that are not finite come from a diverged or damaged run: refused, naming the tensor.
  for (const auto& p : model.parameters())
    for (std::int64_t e = 0; e < p.value.numel; ++e)
      if (!std::isfinite(p.value.data[e]))
        throw format_error(where + ": parameter '" + std::string(p.name) + "' holds a non-finite value at element " + std::to_string(e) +
                           " (a diverged or damaged run)");
  model.set_steps(std::int64_t(number("rng_step")));
  model.set_seed(number("rng_seed"));
  if (opt) opt->set_steps(std::int64_t(number("optimizer_step")));
  return m;
}

}  // namespace ctgrad::checkpoint
