// Optimizers on parameters large enough to be split over threads: the same bits on 1 and 2
// threads (fixed-order sums); Adafactor's arithmetic is checked against NumPy by optim_trace, and
// AdamW's, SGD's and the norm's over many parameters against double-precision references here.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <oneapi/tbb/task_arena.h>

#include "../host.hpp"

using namespace ctgrad;

namespace {
// One [8100, 256] matrix (the T5-small embedding's shape: chunks that do not divide it evenly) and
// a vector, and a loss that touches both.
constexpr auto kModel = [] {
  Builder g;
  Value w = g.scope("w").param("weight", {8100, 256}, init::normal(0.05));
  Value b = g.scope("b").param("bias", {300}, init::normal(0.05));
  g.loss(add(sum(mul(w, w)), sum(mul(b, b))));
  return g;
};
constexpr auto kGraph = freeze<kModel>();

std::vector<float> train(int threads, int steps) {
  Program<kGraph> p(Options{.threads = threads, .seed = 3});
  optim::Adafactor<float> opt(p.parameters(), {.lr = 0.01, .relative_step = false});
  for (int s = 0; s < steps; ++s) {
    p.zero_grad();
    p.forward();
    p.backward();
    for (auto& q : p.parameters())  // gradients of every scale, not just 2w
      for (std::int64_t i = 0; i < q.grad.numel; ++i) q.grad.data[i] *= float(1 + 3 * random::uniform(random::key(std::uint64_t(s), 7, 1), std::uint64_t(i)));
    p.execute([&] { opt.step(); });
  }
  std::vector<float> out;
  for (const auto& q : p.parameters()) out.insert(out.end(), q.value.span().begin(), q.value.span().end());
  return out;
}
}  // namespace

TEST_CASE("Adafactor: the same bits on 1 and 2 threads, on a matrix its chunks do not divide", "[optim]") {
  if (!ctgrad::testing::two_cpus()) return;
  CHECK(train(1, 3) == train(2, 3));
}

namespace {
// Parameters of many sizes, as a model has them: 505 small ones (biases, norms; one of 0 elements,
// so 504 chunks), then one whose chunks (11 of AdamW's 16384, 41 of the norm's 4096) cross the end
// of the optimizers' first parallel batch of optim::kChunkBatch (512) chunks, then a few more.
// (scale_grads's 32768-element chunks fill the first batch exactly.)
struct Params {
  std::vector<std::int64_t> sizes = [] {
    std::vector<std::int64_t> s;
    for (int k = 0; k < 505; ++k) s.push_back(k == 3 ? 0 : 1 + (k * 37) % 40);  // one of 0 elements
    for (std::int64_t n : {std::int64_t(10 * 16384 + 5), std::int64_t(1), std::int64_t(4096), std::int64_t(300)}) s.push_back(n);
    return s;
  }();
  std::vector<std::string> names;
  std::vector<float> values, grads;
  std::vector<Parameter<float>> list;
  Params() {
    std::int64_t total = 0;
    for (std::int64_t n : sizes) total += n;
    values.resize(std::size_t(total)), grads.resize(std::size_t(total));
    for (std::size_t i = 0; i < values.size(); ++i) {
      values[i] = float(random::uniform(random::key(1, 2, 3), i)) - 0.5f;
      grads[i] = (float(random::uniform(random::key(4, 5, 6), i)) - 0.5f) * float(1 + 10 * (i % 7));
    }
    for (std::size_t k = 0; k < sizes.size(); ++k) names.push_back("p" + std::to_string(k) + (sizes[k] > 1000 ? ".weight" : ".bias"));
    std::int64_t at = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      Parameter<float> p;
      p.name = names[k];
      p.value.data = values.data() + at, p.grad.data = grads.data() + at;
      p.value.numel = p.grad.numel = sizes[k];
      p.value.rank = p.grad.rank = sizes[k] > 1000 ? 2 : 1;  // rank < 2: the no-decay group
      p.value.dims[0] = p.grad.dims[0] = sizes[k] > 1000 ? 1 : sizes[k];
      if (sizes[k] > 1000) p.value.dims[1] = p.grad.dims[1] = sizes[k];
      list.push_back(p);
      at += sizes[k];
    }
  }
};

template <class F>
void on_threads(int threads, F f) {
  tbb::task_arena(threads).execute(f);
}
}  // namespace

TEST_CASE("clip_grad_norm over many parameters: the norm and the scaling, the same bits on 1 and 2 threads", "[optim]") {
  Params a, b;
  double expect = 0;
  for (float g : a.grads) expect += double(g) * g;
  expect = std::sqrt(expect);
  const std::vector<float> before = a.grads;
  double na = 0, nb = 0;
  on_threads(1, [&] { na = optim::clip_grad_norm<float>(a.list, 1.0); });
  on_threads(2, [&] { nb = optim::clip_grad_norm<float>(b.list, 1.0); });
  if (ctgrad::testing::two_cpus()) {
    CHECK(na == nb);
    CHECK(a.grads == b.grads);
  }
  CHECK(na == Approx(expect).epsilon(1e-6));
  const double factor = 1.0 / (na + 1e-6);
  std::size_t wrong = 0;  // every element (a chunk left out would leave its elements unscaled)
  for (std::size_t i = 0; i < before.size(); ++i) wrong += a.grads[i] != Approx(before[i] * factor).epsilon(1e-6);
  CHECK(wrong == 0);
}

TEST_CASE("AdamW and SGD over many parameters: each by its own group's rule, the same bits on 1 and 2 threads", "[optim]") {
  // Rank < 2 (the 505 small ones and two more): half the learning rate, no weight decay.
  const std::vector<optim::Group> groups{{"small", [](const optim::ParamInfo& p) { return p.rank < 2; }, 0.5, 0.0}};
  auto small = [](const Params& p, std::size_t k) { return p.list[k].value.rank < 2; };
  // torch.optim.AdamW's update, in double, for the parameters' first two steps.
  auto adamw_reference = [&](const Params& p, double lr, double wd, int steps) {
    std::vector<double> w(p.values.begin(), p.values.end()), m(w.size()), v(w.size());
    std::int64_t at = 0;
    for (std::size_t k = 0; k < p.sizes.size(); ++k) {
      const double decay = small(p, k) ? 0 : wd, rate = small(p, k) ? lr / 2 : lr;
      for (std::int64_t i = at; i < at + p.sizes[k]; ++i)
        for (int t = 1; t <= steps; ++t) {
          const double g = p.grads[std::size_t(i)];
          w[std::size_t(i)] *= 1 - rate * decay;
          m[std::size_t(i)] = 0.9 * m[std::size_t(i)] + 0.1 * g;
          v[std::size_t(i)] = 0.999 * v[std::size_t(i)] + 0.001 * g * g;
          const double mh = m[std::size_t(i)] / (1 - std::pow(0.9, t)), vh = v[std::size_t(i)] / (1 - std::pow(0.999, t));
          w[std::size_t(i)] -= rate * mh / (std::sqrt(vh) + 1e-8);
        }
      at += p.sizes[k];
    }
    return w;
  };
  Params a, b;
  const std::vector<double> expect = adamw_reference(a, 1e-2, 0.5, 2);
  optim::AdamW<float> oa(a.list, {.lr = 1e-2, .weight_decay = 0.5}, groups);
  optim::AdamW<float> ob(b.list, {.lr = 1e-2, .weight_decay = 0.5}, groups);
  on_threads(1, [&] { oa.step(), oa.step(); });
  on_threads(2, [&] { ob.step(), ob.step(); });
  if (ctgrad::testing::two_cpus()) CHECK(a.values == b.values);
  std::size_t wrong = 0;  // every element
  for (std::size_t i = 0; i < expect.size(); ++i) wrong += a.values[i] != Approx(expect[i]).margin(1e-6);
  CHECK(wrong == 0);

  // SGD with momentum and weight decay, two steps on the same gradients (torch.optim.SGD):
  // d = g + wd w, b = d then mu b + d, w -= lr b.
  Params c, d;
  optim::SGD<float> sc(c.list, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}, groups);
  optim::SGD<float> sd(d.list, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}, groups);
  on_threads(1, [&] { sc.step(), sc.step(); });
  on_threads(2, [&] { sd.step(), sd.step(); });
  if (ctgrad::testing::two_cpus()) CHECK(c.values == d.values);
  const Params fresh;
  wrong = 0;
  std::int64_t at = 0;
  for (std::size_t k = 0; k < fresh.sizes.size(); ++k) {
    const double lr = small(fresh, k) ? 0.05 : 0.1, wd = small(fresh, k) ? 0 : 0.01;
    for (std::int64_t i = at; i < at + fresh.sizes[k]; ++i) {
      const double g = fresh.grads[std::size_t(i)], w0 = fresh.values[std::size_t(i)];
      const double b1 = g + wd * w0, w1 = w0 - lr * b1, b2 = 0.9 * b1 + (g + wd * w1), w2 = w1 - lr * b2;
      wrong += c.values[std::size_t(i)] != Approx(w2).margin(1e-6);
    }
    at += fresh.sizes[k];
  }
  CHECK(wrong == 0);
}
