// Optimizers over named parameters. An optimizer sees (name, value, grad) triples only: nothing of
// the model. Parameter groups are chosen by name (e.g. no weight decay on biases and norms), each
// with its own learning-rate factor and weight decay. State tensors are named
// ("<param>.exp_avg", ...) so checkpoints can save and restore them. Updates run SIMD kernels in
// parallel on the calling oneTBB arena: call step() inside model.execute(...) to keep them on the
// model's threads (Options::threads).
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ctgrad/graph/tensor.hpp>
#include <ctgrad/ops/kernels.hpp>

namespace ctgrad::optim {

// What a group's rule sees of a parameter.
struct ParamInfo {
  std::string_view name;  // "h.3.attn.qkv.weight"
  int rank = 0;
};

// Which parameters a group holds, and what it changes.
struct Group {
  std::string name;
  std::function<bool(const ParamInfo&)> match;  // first matching group wins; unmatched: the default
  double lr_factor = 1.0;
  double weight_decay = -1;  // < 0: the optimizer's own
};

// True when one of the dot-separated components of `name` is `component` ("h.0.attn" has "attn").
inline bool has_component(std::string_view name, std::string_view component) {
  for (std::size_t at = 0; at <= name.size();) {
    const std::size_t dot = std::min(name.find('.', at), name.size());
    if (name.substr(at, dot - at) == component) return true;
    at = dot + 1;
  }
  return false;
}

// The usual split (GPT-2, nanoGPT, BERT): no weight decay on parameters of rank < 2, which are the
// biases and the norms' gains and shifts, whatever they are called; plus, by name, the parameters
// with a component in `also` (ViT: its class token "cls" and position table "pos").
inline Group no_decay_group(std::vector<std::string> also = {}) {
  return {"no_decay",
          [also = std::move(also)](const ParamInfo& p) {
            if (p.rank < 2) return true;
            for (const std::string& c : also)
              if (has_component(p.name, c)) return true;
            return false;
          },
          1.0, 0.0};
}

template <class T>
struct StateTensor {
  std::string name;  // "<param>.<slot>"
  std::vector<T> data;
};

template <class T>
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;  // one update from the current gradients
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  std::int64_t steps() const { return t_; }
  // Everything a checkpoint needs to resume bit for bit.
  std::vector<StateTensor<T>>& state() { return state_; }
  void set_steps(std::int64_t t) { t_ = t; }

 protected:
  Optimizer(std::span<const Parameter<T>> params, double lr, double weight_decay, std::vector<Group> groups)
      : params_(params.begin(), params.end()), lr_(lr) {
    for (const auto& p : params_) {
      double lr_factor = 1, wd = weight_decay;
      for (const Group& g : groups)
        if (g.match(ParamInfo{p.name, p.value.rank})) {

          lr_factor = g.lr_factor;
          if (g.weight_decay >= 0) wd = g.weight_decay;
          break;
        }
      lr_factor_.push_back(lr_factor);
      decay_.push_back(wd);
    }
  }
  // Registers a zero state slot per parameter; returns the index of the first.
  std::size_t add_state(const std::string& slot, std::function<std::size_t(const Parameter<T>&)> size = {}) {
    const std::size_t first = state_.size();
    for (const auto& p : params_)
      state_.push_back({std::string(p.name) + "." + slot,
                        std::vector<T>(size ? size(p) : static_cast<std::size_t>(p.value.numel), T(0))});
    return first;
  }

  // A per-step work buffer as large as the largest parameter, made once: step() allocates nothing.
  std::vector<double>& work() {
    if (work_.empty()) {
      std::size_t n = 1;
      for (const auto& p : params_) n = std::max(n, static_cast<std::size_t>(p.value.numel));
      work_.assign(n, 0.0);
    }
    return work_;
  }

  std::vector<Parameter<T>> params_;
  std::vector<double> lr_factor_, decay_, work_;
  std::vector<StateTensor<T>> state_;
  double lr_;
  std::int64_t t_ = 0;
};

// f(k, begin, end, slot) for every chunk [begin, end) of at most `chunk` elements of every
// parameter k (n(k) elements), and then, on the calling thread, done(slots) after each batch of
// chunks (slot: the chunk's place in its batch, 0 .. slots-1, batches in parameter and chunk order).
// The chunks of many parameters share one parallel loop: a loop per parameter leaves cores idle on
// a small one (a bias, a norm's gain) and waits for each loop's end. Chunk boundaries depend on
// `chunk` alone, never on the thread count.
inline constexpr std::int64_t kChunkBatch = 512;
template <class N, class F, class Done>
void for_each_chunk(std::size_t params, N n, std::int64_t chunk, F f, Done done) {
  struct Chunk {
    std::size_t k;
    std::int64_t begin, end;
  };
  std::array<Chunk, kChunkBatch> batch;  // on the stack: a step allocates nothing
  std::int64_t used = 0;
  auto flush = [&] {
    parallel(used, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) f(batch[std::size_t(i)].k, batch[std::size_t(i)].begin, batch[std::size_t(i)].end, i);
    });
    done(used);
    used = 0;
  };
  for (std::size_t k = 0; k < params; ++k)
    for (std::int64_t begin = 0, total = n(k); begin < total; begin += chunk) {
      batch[std::size_t(used++)] = {k, begin, std::min(total, begin + chunk)};
      if (used == kChunkBatch) flush();
    }
  if (used > 0) flush();
}
template <class N, class F>
void for_each_chunk(std::size_t params, N n, std::int64_t chunk, F f) {
  for_each_chunk(params, n, chunk, [&](std::size_t k, std::int64_t b, std::int64_t e, std::int64_t) { f(k, b, e); },
                 [](std::int64_t) {});
}

// Gradients *= factor (SIMD, in parallel). Gradient accumulation: after k backward passes of a
// mean loss, scale by 1/k before step(); clip_grad_norm scales with it too.
template <class T>
void scale_grads(std::span<const Parameter<T>> params, double factor) {
  for_each_chunk(params.size(), [&](std::size_t k) { return params[k].grad.numel; }, 32768,
                 [&](std::size_t k, std::int64_t b, std::int64_t e) { vec::scale(params[k].grad.data + b, e - b, factor); });
}

// Sum of squares of x[0..n) in chunks of 4096: SIMD within a chunk, the chunks in parallel into
// fixed slots of `partial` (the caller's scratch: no allocation once it is large enough), added in
// chunk order. The same bits on any thread count.
template <class T>
double sum_squares_fixed_order(const T* x, std::int64_t n, std::vector<double>& partial) {
  constexpr std::int64_t kChunk = 4096;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  if (partial.size() < std::size_t(chunks)) partial.resize(std::size_t(chunks));
  parallel(chunks, 8, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) partial[std::size_t(c)] = vec::sum_squares(x + c * kChunk, std::min(kChunk, n - c * kChunk));
  });
  double total = 0;
  for (std::int64_t c = 0; c < chunks; ++c) total += partial[std::size_t(c)];
  return total;
}

// Global L2 norm of all gradients, then scales them so it is at most max_norm (as
// torch.nn.utils.clip_grad_norm_). Returns the norm before clipping. Summed in a fixed order.
// SIMD sums over chunks of 4096 (in the working precision), added in double in parameter and
// chunk order; the chunks run in parallel, written to a fixed slot each, so the sum is the same on
// any thread count. The scaling is SIMD and parallel too.
template <class T>
double clip_grad_norm(std::span<const Parameter<T>> params, double max_norm) {
  double total = 0;
  std::array<double, kChunkBatch> partial;
  for_each_chunk(
      params.size(), [&](std::size_t k) { return params[k].grad.numel; }, 4096,
      [&](std::size_t k, std::int64_t b, std::int64_t e, std::int64_t slot) {
        partial[std::size_t(slot)] = vec::sum_squares(params[k].grad.data + b, e - b);
      },
      [&](std::int64_t slots) {
        for (std::int64_t c = 0; c < slots; ++c) total += partial[std::size_t(c)];
      });
  const double norm = std::sqrt(total), factor = max_norm / (norm + 1e-6);
  if (factor < 1) scale_grads(params, factor);
  return norm;
}


}  // namespace ctgrad::optim
