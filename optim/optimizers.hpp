// SGD, Adam, AdamW, Adafactor, LAMB. Each follows a reference to the letter: PyTorch's update for
// those it has (SGD, Adam, AdamW; tests compare first steps against PyTorch), the paper's
// equations otherwise (Adafactor: Shazeer & Stern 2018 as used for T5; LAMB: You et al. 2019).
// Options are aggregates: AdamOptions{.lr = 1e-3, .beta2 = 0.99, .weight_decay = 0.1}.
#pragma once
#include <algorithm>

#include <ctgrad/optim/detail/adam.hpp>
#include <ctgrad/optim/optimizer.hpp>

namespace ctgrad::optim {

struct SGDOptions {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

// PyTorch's SGD: g += wd w; b = mu b + (1 - dampening) g (b = g at the first step);
// g = nesterov ? g + mu b : b; w -= lr g.
template <class T>
class SGD : public Optimizer<T> {
 public:
  SGD(std::span<const Parameter<T>> params, SGDOptions o, std::vector<Group> groups = {})
      : Optimizer<T>(params, o.lr, o.weight_decay, std::move(groups)), o_(o) {
    if (o.momentum != 0) buf_ = this->add_state("momentum_buffer");
  }
  void step() override {
    ++this->t_;
    const T mu = T(o_.momentum), damp = T(1 - o_.dampening);
    const bool first = this->t_ == 1;
    // Elementwise, in fixed chunks over all cores.
    for_each_chunk(this->params_.size(), [&](std::size_t k) { return this->params_[k].value.numel; }, 16384,
                   [&](std::size_t k, std::int64_t begin, std::int64_t end) {
                     const auto& p = this->params_[k];
                     const T lr = T(this->lr_ * this->lr_factor_[k]), wd = T(this->decay_[k]);
                     T* w = p.value.data;
                     const T* g = p.grad.data;
                     T* b = o_.momentum != 0 ? this->state_[buf_ + k].data.data() : nullptr;
                     for (std::int64_t i = begin; i < end; ++i) {
                       T d = g[i] + wd * w[i];
                       if (b) {
                         b[i] = first ? d : mu * b[i] + damp * d;
                         d = o_.nesterov ? d + mu * b[i] : b[i];
                       }
                       w[i] -= lr * d;
                     }
                   });
  }

 private:
  SGDOptions o_;
  std::size_t buf_ = 0;
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
};

// Adam (decoupled = false: L2 added to the gradient, as torch.optim.Adam) and AdamW (decoupled:
// w *= 1 - lr wd before the Adam step, as torch.optim.AdamW).
template <class T>
class Adam : public Optimizer<T> {
 public:
  Adam(std::span<const Parameter<T>> params, AdamOptions o, std::vector<Group> groups = {}, bool decoupled = false)
      : Optimizer<T>(params, o.lr, o.weight_decay, std::move(groups)), o_(o), decoupled_(decoupled) {
    m_ = this->add_state("exp_avg");
    v_ = this->add_state("exp_avg_sq");
  }
  void step() override {
    ++this->t_;
    const double bc1 = 1 - std::pow(o_.beta1, double(this->t_)), bc2 = 1 - std::pow(o_.beta2, double(this->t_));
    const T b1 = T(o_.beta1), b2 = T(o_.beta2), eps = T(o_.eps), sq_bc2 = T(std::sqrt(bc2));
    // SIMD, in fixed chunks of every parameter over all cores: elementwise, so the same bits on any
    // thread count.
    for_each_chunk(this->params_.size(), [&](std::size_t k) { return this->params_[k].value.numel; }, 16384,
                   [&](std::size_t k, std::int64_t b, std::int64_t e) {
                     const auto& p = this->params_[k];
                     const double lr = this->lr_ * this->lr_factor_[k];
                     const T wd = T(this->decay_[k]), step = T(lr / bc1), shrink = T(1 - lr * this->decay_[k]);
                     T *w = p.value.data, *m = this->state_[m_ + k].data.data(), *v = this->state_[v_ + k].data.data();
                     const AdamStep s{.shrink = double(shrink), .weight_decay = double(wd), .beta1 = double(b1), .beta2 = double(b2),
                                           .step = double(step), .sqrt_bc2 = double(sq_bc2), .eps = double(eps), .decoupled = decoupled_};
                     adam_update(w + b, p.grad.data + b, m + b, v + b, e - b, s);
                   });
  }

 private:
  AdamOptions o_;
  bool decoupled_;
  std::size_t m_ = 0, v_ = 0;
};

template <class T>
class AdamW : public Adam<T> {
 public:
  AdamW(std::span<const Parameter<T>> params, AdamOptions o, std::vector<Group> groups = {})
      : Adam<T>(params, o, std::move(groups), true) {}
};

struct AdafactorOptions {
  double lr = 0;  // 0 with relative_step: lr_t = min(1e-2, 1/sqrt(t)) * max(eps2, RMS(w))
  bool relative_step = true, scale_parameter = true, warmup_init = false;
  double eps1 = 1e-30, eps2 = 1e-3, clip_threshold = 1.0, decay_rate = -0.8, beta1 = 0, weight_decay = 0;
};

// Adafactor (Shazeer & Stern 2018, the T5 setting): second moments factored into row and column
// running means for matrices (full for vectors), beta2_t = 1 - t^decay_rate, update clipped to
// RMS <= clip_threshold, relative step size scaled by the parameter's RMS, no first moment unless
// beta1 > 0. Matrices: the last two dims are (rows, cols); leading dims are stacked matrices.
template <class T>
class Adafactor : public Optimizer<T> {
 public:
  Adafactor(std::span<const Parameter<T>> params, AdafactorOptions o, std::vector<Group> groups = {})
      : Optimizer<T>(params, o.lr, o.weight_decay, std::move(groups)), o_(o) {
    row_ = this->add_state("exp_avg_sq_row", [](const Parameter<T>& p) { return factored(p) ? std::size_t(p.value.numel / p.value.size(-1)) : 1; });
    col_ = this->add_state("exp_avg_sq_col", [](const Parameter<T>& p) {
      return factored(p) ? std::size_t(p.value.numel / p.value.size(-2)) : 1;
    });
    v_ = this->add_state("exp_avg_sq", [](const Parameter<T>& p) { return factored(p) ? 1 : std::size_t(p.value.numel); });
    if (o.beta1 > 0) m_ = this->add_state("exp_avg");
  }
  static bool factored(const Parameter<T>& p) { return p.value.rank >= 2; }

  void step() override {
    ++this->t_;
    const double t = double(this->t_);
    const double beta2 = 1 - std::pow(t, o_.decay_rate);
    for (std::size_t k = 0; k < this->params_.size(); ++k) {
      const auto& p = this->params_[k];
      const std::int64_t n = p.value.numel;
      T* w = p.value.data;
      const T* g = p.grad.data;
      double lr = this->lr_;
      if (o_.relative_step) {
        const double min_step = o_.warmup_init ? 1e-6 * t : 1e-2;
        lr = std::min(min_step, 1 / std::sqrt(t));
      }
      if (o_.scale_parameter) lr *= std::max(o_.eps2, rms(w, n));
      lr *= this->lr_factor_[k];
      std::vector<double>& u = this->work();  // the update, before clipping
      // In parallel over rows (or elements) in fixed chunks; every sum runs in a fixed order, so
      // the same bits on any thread count.
      if (factored(p)) {
        const std::int64_t cols = p.value.size(-1), rows = p.value.size(-2), mats = n / (rows * cols);
        T *r = this->state_[row_ + k].data.data(), *c = this->state_[col_ + k].data.data();
        for (std::int64_t q = 0; q < mats; ++q) {
          T* rq = r + q * rows;
          T* cq = c + q * cols;
          const T* gq = g + q * rows * cols;
          parallel(rows, std::max<std::int64_t>(1, 16384 / cols), [&](std::int64_t i0, std::int64_t i1) {
            for (std::int64_t i = i0; i < i1; ++i) {
              double s = 0;
              for (std::int64_t j = 0; j < cols; ++j) s += double(gq[i * cols + j]) * gq[i * cols + j] + o_.eps1;
              rq[i] = T(beta2 * rq[i] + (1 - beta2) * s / double(cols));
            }
          });
          parallel(cols, 64, [&](std::int64_t j0, std::int64_t j1) {
            for (std::int64_t jb = j0; jb < j1; jb += 64) {  // columns in blocks of 64, each summed over the rows in order
              const std::int64_t je = std::min(j1, jb + 64);
              double s[64] = {};
              for (std::int64_t i = 0; i < rows; ++i)
                for (std::int64_t j = jb; j < je; ++j) s[j - jb] += double(gq[i * cols + j]) * gq[i * cols + j] + o_.eps1;
              for (std::int64_t j = jb; j < je; ++j) cq[j] = T(beta2 * cq[j] + (1 - beta2) * s[j - jb] / double(rows));
            }
          });
          double row_mean = 0;
          for (std::int64_t i = 0; i < rows; ++i) row_mean += rq[i] / double(rows);
          parallel(rows, std::max<std::int64_t>(1, 16384 / cols), [&](std::int64_t i0, std::int64_t i1) {
            for (std::int64_t i = i0; i < i1; ++i) {
              const double ri = double(rq[i]) / row_mean;
              for (std::int64_t j = 0; j < cols; ++j) u[std::size_t(q * rows * cols + i * cols + j)] = gq[i * cols + j] / std::sqrt(ri * double(cq[j]));
            }
          });
        }
      } else {
        T* v = this->state_[v_ + k].data.data();
        parallel(n, 16384, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) {
            v[i] = T(beta2 * v[i] + (1 - beta2) * (double(g[i]) * g[i] + o_.eps1));
            u[std::size_t(i)] = g[i] / std::sqrt(double(v[i]));
          }
        });
      }
      const double u_rms = std::sqrt(sum_squares_fixed_order(u.data(), n, partial_) / double(n));
      const double clip = std::max(1.0, u_rms / o_.clip_threshold);
      T* m = o_.beta1 > 0 ? this->state_[m_ + k].data.data() : nullptr;
      const double wd = this->decay_[k];
      parallel(n, 16384, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          double ui = u[std::size_t(i)] / clip;
          if (m) ui = m[i] = T(o_.beta1 * m[i] + (1 - o_.beta1) * ui);
          if (wd != 0) w[i] = T(w[i] - wd * lr * w[i]);
          w[i] = T(w[i] - lr * ui);
        }
      });
    }
  }

 private:
  double rms(const T* w, std::int64_t n) { return std::sqrt(sum_squares_fixed_order(w, n, partial_) / double(n)); }
  AdafactorOptions o_;
  std::size_t row_ = 0, col_ = 0, v_ = 0, m_ = 0;
  std::vector<double> partial_;
};

struct LambOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0;
};

// LAMB (You et al. 2019, algorithm 2): Adam direction r = m_hat / (sqrt(v_hat) + eps) + wd w,
// scaled per parameter tensor by the trust ratio ||w|| / ||r|| (1 when either norm is 0).
template <class T>
class Lamb : public Optimizer<T> {
 public:
  Lamb(std::span<const Parameter<T>> params, LambOptions o, std::vector<Group> groups = {})
      : Optimizer<T>(params, o.lr, o.weight_decay, std::move(groups)), o_(o) {
    m_ = this->add_state("exp_avg");
    v_ = this->add_state("exp_avg_sq");
  }
  void step() override {
    ++this->t_;
    const double bc1 = 1 - std::pow(o_.beta1, double(this->t_)), bc2 = 1 - std::pow(o_.beta2, double(this->t_));
    for (std::size_t k = 0; k < this->params_.size(); ++k) {
      const auto& p = this->params_[k];
      const std::int64_t n = p.value.numel;
      T *w = p.value.data, *m = this->state_[m_ + k].data.data(), *v = this->state_[v_ + k].data.data();
      const T* g = p.grad.data;
      const double wd = this->decay_[k];
      std::vector<double>& r = this->work();
      double wn = 0, rn = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        m[i] = T(o_.beta1 * m[i] + (1 - o_.beta1) * g[i]);
        v[i] = T(o_.beta2 * v[i] + (1 - o_.beta2) * double(g[i]) * g[i]);
        const double ri = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + o_.eps) + wd * w[i];
        r[std::size_t(i)] = ri;
        wn += double(w[i]) * w[i];
        rn += ri * ri;
      }
      wn = std::sqrt(wn), rn = std::sqrt(rn);
      const double trust = wn > 0 && rn > 0 ? wn / rn : 1.0;
      const double lr = this->lr_ * this->lr_factor_[k] * trust;
      for (std::int64_t i = 0; i < n; ++i) w[i] = T(w[i] - lr * r[std::size_t(i)]);
    }
  }

 private:
  LambOptions o_;
  std::size_t m_ = 0, v_ = 0;
};


}  // namespace ctgrad::optim
