// The ViT: whole-model gradchecks (class token and mean pooling), a tiny ViT overfitting a small
// batch of Fashion-MNIST, and a smoke training run on a few hundred images that beats chance.
// (Patch embedding = an explicit convolution, and its gradcheck: tests/ops/.)
#include <catch2/catch.hpp>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/data/idx.hpp>
#include <ctgrad/models/vit.hpp>
#include <ctgrad/optim/optimizers.hpp>

using namespace ctgrad;
using namespace ctgrad::models;

namespace {
constexpr VitConfig kMicro{.image = 8, .channels = 2, .patch = 4, .d_model = 8, .n_layer = 2, .heads = 2, .d_mlp = 12, .classes = 3};
constexpr VitConfig kMicroMean{.image = 8, .channels = 2, .patch = 4, .d_model = 8, .n_layer = 1, .heads = 2, .d_mlp = 12, .classes = 3,
                               .mean_pool = true};
constexpr auto kMicroGraph = freeze<vit, kMicro>();
constexpr auto kMicroMeanGraph = freeze<vit, kMicroMean>();
constexpr auto kTinyGraph = freeze<vit, kVitTiny>();

// Images n0 .. n0+count of a split as floats in [0, 1].
void load(const data::ImageSet& set, std::int64_t n0, std::int64_t count, std::vector<float>& x, std::vector<std::int32_t>& y) {
  x.resize(std::size_t(count * 784));
  y.resize(std::size_t(count));
  for (std::int64_t i = 0; i < count * 784; ++i) x[std::size_t(i)] = float(set.pixels[std::size_t(n0 * 784 + i)]) / 255.0f;
  for (std::int64_t i = 0; i < count; ++i) y[std::size_t(i)] = set.labels[std::size_t(n0 + i)];
}

template <class P>
double accuracy(P& model, const std::vector<float>& x, const std::vector<std::int32_t>& y) {
  const std::int64_t n = std::int64_t(y.size());
  model.set_input(models::vit_inputs::images, std::span<const float>(x), {n, 1, 28, 28});
  model.set_input(models::vit_inputs::labels, std::span<const std::int32_t>(y), {n});
  model.forward(Mode::infer);
  const auto l = model.output("logits");
  int right = 0;
  for (std::int64_t i = 0; i < n; ++i) right += std::max_element(l.data + i * 10, l.data + i * 10 + 10) - (l.data + i * 10) == y[std::size_t(i)];
  return double(right) / double(n);
}
}  // namespace

TEST_CASE("ViT: whole-model gradcheck in double precision, class token and mean pooling", "[models][vit]") {
  const RandomInputs in{.seed = 2, .sym = {3, 1, 1, 1, 1, 1}, .index_range = 3};
  auto r = gradcheck<kMicroGraph>(in);
  INFO(r.worst << "\n" << r.report);
  CHECK(r.ok);
  auto m = gradcheck<kMicroMeanGraph>([&](auto& p) {
    p.set_hyper("dropout", 0);
    fill_random_inputs(p, in);
  });
  INFO(m.worst << "\n" << m.report);
  CHECK(m.ok);
}

TEST_CASE("ViT: a tiny ViT overfits a small batch, and a smoke run on 600 images beats chance widely", "[models][vit]") {
  const data::ImageSet train = data::fashion_mnist("train"), test = data::fashion_mnist("test");
  std::vector<float> x;
  std::vector<std::int32_t> y;
  {
    Program<kTinyGraph> model(Options{.threads = 2, .seed = 1, .hypers = {{"dropout", 0}}});
    optim::AdamW<float> opt(model.parameters(), optim::AdamOptions{.lr = 3e-3});
    load(train, 0, 32, x, y);
    for (int step = 0; step < 150; ++step) {
      model.set_input(models::vit_inputs::images, std::span<const float>(x), {32, 1, 28, 28});
      model.set_input(models::vit_inputs::labels, std::span<const std::int32_t>(y), {32});
      model.zero_grad();
      model.forward();
      model.backward();
      opt.step();
    }
    CHECK(model.loss() < 0.05);
    CHECK(accuracy(model, x, y) == 1.0);
  }
  Program<kTinyGraph> model(Options{.threads = 2, .seed = 2, .hypers = {{"dropout", 0}}});
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions{.lr = 2e-3});
  for (int epoch = 0; epoch < 5; ++epoch)
    for (std::int64_t b = 0; b < 600; b += 50) {
      load(train, b, 50, x, y);
      model.set_input(models::vit_inputs::images, std::span<const float>(x), {50, 1, 28, 28});
      model.set_input(models::vit_inputs::labels, std::span<const std::int32_t>(y), {50});
      model.zero_grad();
      model.forward();
      model.backward();
      opt.step();
    }
  load(test, 0, 500, x, y);
  const double acc = accuracy(model, x, y);
  INFO("test accuracy after 5 epochs of 600 images: " << acc);
  CHECK(acc > 0.5);  // chance is 0.1
}
