// Prints, as JSON lines, the parameters after each of the first steps of every optimizer on a toy
// regression problem; check_against_torch.py replays the same with PyTorch (or the papers'
// equations) and compares.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/optim/optimizers.hpp>

using namespace ctgrad;

constexpr auto toy = [] {
  Builder g;
  Value x = g.input("x", {5, 4});
  Value y = g.input("y", {5, 3});
  g.loss(mse(layers::linear(g.scope("fc"), x, 3), y));
  return g;
};
static constexpr auto G = freeze<toy>();

int main() {
  const char* configs[] = {"sgd", "sgd_momentum_nesterov_wd", "adam_wd", "adamw_groups", "adamw_clip", "adafactor", "lamb_wd"};
  for (const std::string cfg : configs) {
    Program<G, double> p;
    std::vector<double> x(20), y(15);
    for (int i = 0; i < 20; ++i) x[std::size_t(i)] = std::sin(0.7 * i + 0.3);
    for (int i = 0; i < 15; ++i) y[std::size_t(i)] = std::cos(1.3 * i);
    p.set_input("x", std::span<const double>(x), {5, 4});
    p.set_input("y", std::span<const double>(y), {5, 3});
    auto& w = p.parameter("fc.weight").value;
    auto& b = p.parameter("fc.bias").value;
    for (int i = 0; i < 12; ++i) w[i] = 0.1 * (i % 4) - 0.07 * (i / 4) + 0.05;
    for (int i = 0; i < 3; ++i) b[i] = 0.02 * i - 0.01;
    std::unique_ptr<optim::Optimizer<double>> opt;
    const auto params = p.parameters();
    if (cfg == "sgd") opt = std::make_unique<optim::SGD<double>>(params, optim::SGDOptions{.lr = 0.1});
    if (cfg == "sgd_momentum_nesterov_wd")
      opt = std::make_unique<optim::SGD<double>>(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
    if (cfg == "adam_wd") opt = std::make_unique<optim::Adam<double>>(params, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
    if (cfg == "adamw_groups" || cfg == "adamw_clip")
      opt = std::make_unique<optim::AdamW<double>>(params, optim::AdamOptions{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1},
                                                   std::vector<optim::Group>{optim::no_decay_group()});
    if (cfg == "adafactor") opt = std::make_unique<optim::Adafactor<double>>(params, optim::AdafactorOptions{});
    if (cfg == "lamb_wd") opt = std::make_unique<optim::Lamb<double>>(params, optim::LambOptions{.lr = 0.01, .weight_decay = 0.01});
    for (int step = 1; step <= 5; ++step) {
      p.zero_grad();
      p.forward();
      p.backward();
      if (cfg == "adamw_clip") optim::clip_grad_norm(params, 0.5);
      opt->step();
      std::printf("{\"config\":\"%s\",\"step\":%d,\"loss\":%.17g,\"weight\":[", cfg.c_str(), step, p.loss());
      for (int i = 0; i < 12; ++i) std::printf("%s%.17g", i ? "," : "", w[i]);
      std::printf("],\"bias\":[");
      for (int i = 0; i < 3; ++i) std::printf("%s%.17g", i ? "," : "", b[i]);
      std::printf("]}\n");
    }
  }
}
