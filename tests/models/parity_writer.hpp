// What the parity writers save for tests/models/parity.py: every parameter and its gradient, the
// logits and loss of the last forward/backward, the integer inputs, and the config.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/optim/optimizers.hpp>

namespace ctgrad::testing {

struct IntInput {
  std::string name;
  const std::vector<std::int32_t>* data;
  std::vector<std::int64_t> shape;
};

// The writers' recipe: `steps` optimizer steps on batches batch(1), batch(2), ... (so the weights
// leave their initial scale), then the forward and backward pass of batch(1000) that is saved.
template <class Batch>
void train_then_forward(Executor<float>& model, optim::Optimizer<float>& opt, Batch batch, int steps = 30) {
  for (int step = 1; step <= steps; ++step) {
    batch(std::uint64_t(step));
    model.zero_grad();
    model.forward();
    model.backward();
    opt.step();
  }
  batch(1000);
  model.zero_grad();
  model.forward();
  model.backward();
}

inline void save_for_parity(const char* path, const Executor<float>& model, const std::vector<IntInput>& inputs, const std::string& config,
                            const std::vector<std::string>& more_outputs = {}) {
  std::vector<checkpoint::TensorView> out;
  for (const auto& p : model.parameters()) {
    std::vector<std::int64_t> shape(p.value.shape().begin(), p.value.shape().end());
    out.push_back(checkpoint::view_of<float>(std::string(p.name), p.value.span(), shape));
    out.push_back(checkpoint::view_of<float>("grad." + std::string(p.name), p.grad.span(), shape));
  }
  const auto logits = model.output("logits");
  const float loss = model.loss();
  out.push_back(checkpoint::view_of<float>("out.logits", logits.span(), {logits.shape().begin(), logits.shape().end()}));
  out.push_back(checkpoint::view_of<float>("out.loss", std::span<const float>(&loss, 1), {1}));
  for (const auto& name : more_outputs) {
    const auto o = model.output(name);
    out.push_back(checkpoint::view_of<float>("out." + name, o.span(), {o.shape().begin(), o.shape().end()}));
  }
  for (const auto& in : inputs) out.push_back(checkpoint::view_of<std::int32_t>("in." + in.name, *in.data, in.shape));
  checkpoint::save(path, out, {{"config", config}});
}

}  // namespace ctgrad::testing
