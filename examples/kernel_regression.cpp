// Attention pooling by similarity (d2l 11.2): Nadaraya-Watson kernel regression
//   f(q) = sum_i softmax_i(-((q - x_i) w)^2 / 2) y_i
// on d2l's data (50 noisy samples of y = 2 sin x + x^0.8 on [0, 5]), the Gaussian kernel's inverse width w
// learnt by SGD on the training points, each predicted from the others (leave one out). Prints the
// loss and the validation error before and after, and draws d2l's two figures: the fit, and the
// attention weights of the validation inputs (queries, rows) over the training inputs (keys).
//   example_kernel_regression [FOLDER]   (the PNGs go there; default kernel_regression/)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/training/image_grid.hpp>
#include <ctgrad/training/log.hpp>
#include <ctgrad/training/plot_data.hpp>

using namespace ctgrad;

// Queries [Batch, Seq] against keys and values [Batch, SeqKV]: each row its own set of pairs.
constexpr auto kernel_regression = [] {
  Builder g;
  Value q = g.input("queries", {Batch, Seq});
  Value k = g.input("keys", {Batch, SeqKV});
  Value v = g.input("values", {Batch, SeqKV});
  const layers::PooledAttention a = layers::nadaraya_watson(g.scope("nw"), q, k, v, init::constant(1.0));
  g.output(a.weights, "weights");
  g.output(a.out, "predictions");
  g.loss(mse(a.out, g.input("targets", {Batch, Seq})));
  return g;
};
static constexpr auto G = freeze<kernel_regression>();

double f(double x) { return 2 * std::sin(x) + std::pow(x, 0.8); }

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : "kernel_regression";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const char* png : {"fit.png", "attention.png"})
    if (std::filesystem::exists(dir / png)) {
      std::fprintf(stderr, "example_kernel_regression: %s already exists: give another folder\n", (dir / png).c_str());
      return 2;
    }
  // d2l's data: 50 sorted training inputs on [0, 5), targets with noise N(0, 0.5); validation on a grid.
  const int n = 50;
  std::vector<double> x(n), y(n), xv, yv;
  for (int i = 0; i < n; ++i) x[std::size_t(i)] = 5 * random::uniform(random::key(11, "x"), std::uint64_t(i));
  std::sort(x.begin(), x.end());
  for (int i = 0; i < n; ++i) y[std::size_t(i)] = f(x[std::size_t(i)]) + 0.5 * random::normal(random::key(11, "noise"), std::uint64_t(i));
  for (int i = 0; i < 50; ++i) xv.push_back(0.1 * i), yv.push_back(f(0.1 * i));

  Program<G, double> model({.threads = 1, .seed = 1});
  // Training rows: each point a query over the other 49 (leave one out).
  std::vector<double> q(x), t(y), k, v;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (j != i) k.push_back(x[std::size_t(j)]), v.push_back(y[std::size_t(j)]);
  auto set_train = [&] {
    model.set_input("queries", std::span<const double>(q), {n, 1});
    model.set_input("keys", std::span<const double>(k), {n, n - 1});
    model.set_input("values", std::span<const double>(v), {n, n - 1});
    model.set_input("targets", std::span<const double>(t), {n, 1});
  };
  auto validate = [&] {  // one row: the 50 validation queries over all training pairs
    model.set_input("queries", std::span<const double>(xv), {1, 50});
    model.set_input("keys", std::span<const double>(x), {1, n});
    model.set_input("values", std::span<const double>(y), {1, n});
    model.set_input("targets", std::span<const double>(yv), {1, 50});
    model.forward(Mode::infer);
    return model.loss();
  };
  const double before = validate();
  std::printf("w = 1, kernel width 1 (nonparametric): validation MSE %.4f\n", before);
  optim::SGD<double> sgd(model.parameters(), {.lr = 0.5});  // d2l: SGD, rate 0.5, 5 epochs
  double first = 0, last = 0;
  for (int epoch = 1; epoch <= 5; ++epoch) {
    set_train();
    model.zero_grad();
    model.forward();
    model.backward();
    sgd.step();
    (epoch == 1 ? first : last) = model.loss();
    std::printf("epoch %d: training loss %.4f, w %.4f\n", epoch, model.loss(), model.parameter("nw.w").value.data[0]);
  }
  const double after = validate();
  std::printf("learnt w = %.4f (kernel width 1/w): validation MSE %.4f (was %.4f)\n", model.parameter("nw.w").value.data[0], after, before);

  // d2l's figures: the fit over the training points, and the attention weights.
  std::string rows;
  const auto pred = model.output("predictions");
  for (int i = 0; i < 50; ++i) rows += std::to_string(xv[std::size_t(i)]) + " " + std::to_string(yv[std::size_t(i)]) + " " + std::to_string(pred.data[i]) + "\n";
  std::string points;
  for (int i = 0; i < n; ++i) points += std::to_string(x[std::size_t(i)]) + " " + std::to_string(y[std::size_t(i)]) + "\n";
  const training::PlotData fit(dir, rows), train_points(dir, points);
  const bool drawn = training::gnuplot(
      "set terminal pngcairo size 640,420\nset output ARG1\nset xlabel 'x'\nset ylabel 'y'\nset key top left\n"
      "plot ARG2 using 1:2 with lines title 'truth', ARG2 using 1:3 with lines title 'predictions', ARG3 using 1:2 with points pt 7 ps 0.6 title 'training data'\n",
      dir / "fit.png", {fit.path(), train_points.path()});
  const auto w = model.output("weights");  // [1, 50 queries, 50 keys]
  const training::ImageGrid grid{.title = "attention weights: validation inputs (rows) over training inputs (columns)", .width = 560, .height = 520,
                                 .rows = w.size(1), .cols = w.size(2), .unit_range = false};
  const bool heat = training::plot_image_grid(dir / "attention.png", grid, {{.values = {w.data, w.data + w.numel}}});
  if (drawn && heat) std::printf("wrote %s and %s\n", (dir / "fit.png").c_str(), (dir / "attention.png").c_str());
  // What the test checks: training lowers the loss and the validation error.
  return last < first && after < before ? 0 : 1;
}
