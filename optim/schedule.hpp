// Learning-rate schedules: lr as a function of the update number t = 1, 2, ...
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>

namespace ctgrad::optim {

using Schedule = std::function<double(std::int64_t t)>;

inline Schedule constant(double lr) {
  return [lr](std::int64_t) { return lr; };
}

// "Attention Is All You Need" eq. 3: factor * d_model^-0.5 * min(t^-0.5, t * warmup^-1.5).
inline Schedule noam(double d_model, std::int64_t warmup, double factor = 1.0) {
  return [=](std::int64_t t) {
    const double s = double(std::max<std::int64_t>(t, 1));
    return factor * std::pow(d_model, -0.5) * std::min(std::pow(s, -0.5), s * std::pow(double(warmup), -1.5));
  };
}

// T5's "inverse square root": factor / sqrt(max(t, k)), constant for the first k updates (the
// paper: k = 10^4, with Adafactor's step scaled by each parameter's RMS).
inline Schedule inverse_sqrt(std::int64_t k, double factor = 1.0) {
  return [=](std::int64_t t) { return factor / std::sqrt(double(std::max<std::int64_t>({t, k, 1}))); };
}

// Linear warm-up from 0 to max_lr over `warmup` updates, then cosine (or linear) decay to min_lr at
// `total`; min_lr afterwards.
inline Schedule warmup_cosine(double max_lr, double min_lr, std::int64_t warmup, std::int64_t total, bool linear = false) {
  return [=](std::int64_t t) {
    if (t <= warmup) return max_lr * double(t) / double(std::max<std::int64_t>(warmup, 1));
    if (t >= total) return min_lr;
    const double progress = double(t - warmup) / double(std::max<std::int64_t>(total - warmup, 1));
    const double shape = linear ? 1 - progress : 0.5 * (1 + std::cos(M_PI * progress));
    return min_lr + (max_lr - min_lr) * shape;
  };
}
inline Schedule warmup_linear(double max_lr, double min_lr, std::int64_t warmup, std::int64_t total) {
  return warmup_cosine(max_lr, min_lr, warmup, total, true);
}

// Warmup-stable-decay: linear warm-up, max_lr held, then linear decay to min_lr over `decay`.
inline Schedule warmup_stable_decay(double max_lr, double min_lr, std::int64_t warmup, std::int64_t stable,
                                    std::int64_t decay) {
  return [=](std::int64_t t) {
    if (t <= warmup) return max_lr * double(t) / double(std::max<std::int64_t>(warmup, 1));
    if (t <= warmup + stable) return max_lr;
    const double progress = std::min(1.0, double(t - warmup - stable) / double(std::max<std::int64_t>(decay, 1)));
    return max_lr + (min_lr - max_lr) * progress;
  };
}

}  // namespace ctgrad::optim
