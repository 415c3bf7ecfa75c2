// Repeated<Block>: one compiled block run as N layers, N chosen at run time (e.g. from a config),
// each layer with its own parameters ("layers.3.fc1.weight"). The block's graph is compiled once
// whatever N is; only the parameter and activation memory grows with N.
//
// Block contract: an input "x" declared In{.grad = true}, an output "out" of the same shape, no
// loss. Other inputs (masks, ...) are shared by every layer. Backward is seeded with the gradient
// of the last layer's output; afterwards input_grad() is the gradient of layer 0's input.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <ctgrad/graph/program.hpp>

namespace ctgrad {

template <const auto& Block, class T = float>
class Repeated {
  static constexpr bool block_fits() {
    int x = -1, out = -1;
    for (int i = 0; i < Block.size; ++i) {
      if (Block[i].kind == NodeKind::input && Block.name(i) == "x" && Block[i].requires_grad) x = i;
      if (Block[i].is_output && Block.output_name(i) == "out") out = i;
    }
    return x >= 0 && out >= 0 && Block[x].shape == Block[out].shape && Block.loss < 0;
  }
  static_assert(block_fits(),
                "ctgrad: Repeated<Block> needs an input \"x\" with In{.grad = true}, an output \"out\" "
                "of the same shape, and no loss");

 public:
  Repeated(int layers, Options opts = {}, const std::string& prefix = "layers") {
    if (layers < 1) throw std::invalid_argument("ctgrad: Repeated needs at least one layer, got " + std::to_string(layers));
    for (int i = 0; i < layers; ++i) {
      Options o = opts;
      o.prefix = prefix + "." + std::to_string(i);
      layers_.push_back(std::make_unique<Program<Block, T>>(o));
      for (const auto& p : layers_.back()->parameters()) params_.push_back(p);
    }
  }

  int layers() const { return int(layers_.size()); }
  Program<Block, T>& layer(int i) { return *layers_[static_cast<std::size_t>(i)]; }

  // "x" goes to layer 0; any other input is shared by all layers.
  template <class U>
  void set_input(std::string_view name, std::span<const U> data, std::initializer_list<std::int64_t> shape) {
    if (name == "x") {
      layers_[0]->set_input(name, data, shape);
      return;
    }
    for (auto& l : layers_) l->set_input(name, data, shape);
  }

  void forward(Mode mode = Mode::train) {
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      if (i) {
        TensorView<T> prev = layers_[i - 1]->output("out");
        layers_[i]->set_input("x", std::span<const T>(prev.span()), prev.shape());
      }
      layers_[i]->forward(mode);
    }
  }
  TensorView<T> output() const { return layers_.back()->output("out"); }

  // grad_out: d(loss)/d(output()).
  void backward(std::span<const T> grad_out) {
    for (std::size_t i = layers_.size(); i-- > 0;) {
      if (i + 1 == layers_.size())
        layers_[i]->set_output_grad("out", grad_out);
      else
        layers_[i]->set_output_grad("out", std::span<const T>(layers_[i + 1]->input_grad("x").span()));
      layers_[i]->backward();
    }
  }
  TensorView<T> input_grad() const { return layers_[0]->input_grad("x"); }

  void zero_grad() {
    for (auto& l : layers_) l->zero_grad();
  }
  std::span<const Parameter<T>> parameters() const { return params_; }

 private:
  std::vector<std::unique_ptr<Program<Block, T>>> layers_;
  std::vector<Parameter<T>> params_;
};

}  // namespace ctgrad
