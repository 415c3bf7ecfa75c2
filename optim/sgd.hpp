// SGD with momentum, Nesterov and (coupled) weight decay, over any model's named parameters.
// Sees only (name, value, grad): it knows nothing of the model.
#pragma once
#include <span>
#include <vector>

#include <ctgrad/graph/tensor.hpp>

namespace ctgrad::optim {

struct SGDOptions {
  double lr_ = 0.01, momentum_ = 0, weight_decay_ = 0;
  bool nesterov_ = false;
  SGDOptions& lr(double v) { return lr_ = v, *this; }
  SGDOptions& momentum(double v) { return momentum_ = v, *this; }
  SGDOptions& weight_decay(double v) { return weight_decay_ = v, *this; }
  SGDOptions& nesterov(bool v) { return nesterov_ = v, *this; }
};

// PyTorch's update: g += wd*w; b = mu*b + g; g = nesterov ? g + mu*b : b; w -= lr*g.
template <class T>
class SGD {
 public:
  SGD(std::span<const Parameter<T>> params, SGDOptions o) : params_(params), o_(o) {
    for (const auto& p : params_) buf_.emplace_back(static_cast<std::size_t>(p.value.numel), T(0));
  }
  void set_lr(double lr) { o_.lr_ = lr; }
  void step() {
    const T lr = T(o_.lr_), mu = T(o_.momentum_), wd = T(o_.weight_decay_);
    for (std::size_t k = 0; k < params_.size(); ++k) {
      T *w = params_[k].value.data, *b = buf_[k].data();
      const T* g = params_[k].grad.data;
      const std::int64_t n = params_[k].value.numel;
      for (std::int64_t i = 0; i < n; ++i) {
        T d = g[i] + wd * w[i];
        if (mu != T(0)) {
          b[i] = first_ ? d : mu * b[i] + d;
          d = o_.nesterov_ ? d + mu * b[i] : b[i];
        }
        w[i] -= lr * d;
      }
    }
    first_ = false;
  }

 private:
  std::span<const Parameter<T>> params_;
  SGDOptions o_;
  std::vector<std::vector<T>> buf_;
  bool first_ = true;
};

}  // namespace ctgrad::optim
