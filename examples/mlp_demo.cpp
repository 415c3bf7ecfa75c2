// examples/mlp_demo.cpp (example_mlp_demo): trains an MLP block (residual) on synthetic data and shows the loss falling.
// The data: a stream of 32-dim Gaussian inputs labelled by a fixed random "teacher" network
// (10 classes); accuracy is measured on held-out samples.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/optim/optimizers.hpp>

using namespace ctgrad;

constexpr int kIn = 32, kHidden = 256, kClasses = 10, kBlocks = 2;

constexpr auto student = [] {
  Builder g;
  Value x = g.input("x", {Batch, kIn});
  Value y = g.input("y", {Batch}, {.dtype = DType::index});
  Value h = relu(layers::linear(g.scope("embed"), x, kHidden));
  for (int i = 0; i < kBlocks; ++i) {  // pre-activation residual MLP blocks
    Scope b = g.scope("block", i);
    h = h + layers::linear(b.scope("fc2"), relu(layers::linear(b.scope("fc1"), h, kHidden)), kHidden);
  }
  Value logits = layers::linear(g.scope("head"), h, kClasses);
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, y));
  return g;
};
static constexpr auto G = freeze<student>();

namespace {

struct Data {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};

// Teacher: y = argmax(W2 tanh(2 W1 x / sqrt(32))), fixed random weights.
class Teacher {
 public:
  Teacher() : w1_(64 * kIn), w2_(kClasses * 64) {
    const std::uint64_t kw = random::key(1234, "teacher");
    for (std::size_t i = 0; i < w1_.size(); ++i) w1_[i] = float(random::normal(kw, i) * 2 / std::sqrt(double(kIn)));
    for (std::size_t i = 0; i < w2_.size(); ++i) w2_[i] = float(random::normal(kw, 100000 + i));
  }
  // Samples [first, first + n) of the stream with this seed.
  void sample(Data& d, int n, std::uint64_t seed, std::uint64_t first) const {
    d.x.resize(std::size_t(n) * kIn);
    d.y.resize(std::size_t(n));
    const std::uint64_t kx = random::key(seed, "inputs");
    for (std::size_t i = 0; i < d.x.size(); ++i) d.x[i] = float(random::normal(kx, first * kIn + i));
    for (int s = 0; s < n; ++s) {
      const float* x = &d.x[std::size_t(s) * kIn];
      float hid[64], best = -1e30f;
      for (int j = 0; j < 64; ++j) {
        float a = 0;
        for (int k = 0; k < kIn; ++k) a += w1_[std::size_t(j * kIn + k)] * x[k];
        hid[j] = std::tanh(a);
      }
      for (int c = 0; c < kClasses; ++c) {
        float o = 0;
        for (int j = 0; j < 64; ++j) o += w2_[std::size_t(c * 64 + j)] * hid[j];
        if (o > best) best = o, d.y[std::size_t(s)] = c;
      }
    }
  }

 private:
  std::vector<float> w1_, w2_;
};

double accuracy(Program<G>& p, const Data& d, int n) {
  p.set_input("x", std::span<const float>(d.x.data(), std::size_t(n) * kIn), {n, kIn});
  p.set_input("y", std::span<const std::int32_t>(d.y.data(), std::size_t(n)), {n});
  p.forward(Mode::infer);
  auto logits = p.output("logits");
  int right = 0;
  for (int s = 0; s < n; ++s) {
    int arg = 0;
    for (int c = 1; c < kClasses; ++c)
      if (logits[s * kClasses + c] > logits[s * kClasses + arg]) arg = c;
    right += arg == d.y[std::size_t(s)];
  }
  return double(right) / n;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 3000, batch = 128, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else if (a == "--batch") batch = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "ctgrad-demo: unknown option %s (known: --steps N --batch N --threads N)\n", a.c_str());
      return 2;
    }
  }
  const int n_test = 4096;
  const Teacher teacher;
  Data batch_data, test;
  teacher.sample(test, n_test, 2, 0);
  Program<G> model(Options{.threads = threads, .seed = 42});
  optim::SGD<float> opt(model.parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});

  std::size_t n_params = 0;
  for (const auto& p : model.parameters()) n_params += std::size_t(p.value.numel);
  std::printf("ctgrad-demo: residual MLP, %d blocks, %zu parameters, %d graph nodes, %d threads\n", kBlocks,
              n_params, G.size, model.threads());
  std::printf("data: a stream of fresh teacher-labelled samples, %d held-out test samples, %d classes (chance %.0f%%)\n",
              n_test, kClasses, 100.0 / kClasses);
  std::printf("before training: test accuracy %.1f%%\n", 100 * accuracy(model, test, n_test));

  const bool tty = isatty(STDOUT_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  double first_loss = 0, avg = 0;
  for (int step = 1; step <= steps; ++step) {
    teacher.sample(batch_data, batch, 1, std::uint64_t(step - 1) * std::uint64_t(batch));
    model.set_input("x", std::span<const float>(batch_data.x), {batch, kIn});
    model.set_input("y", std::span<const std::int32_t>(batch_data.y), {batch});
    model.zero_grad();
    model.forward();
    model.backward();
    opt.set_lr(0.05 * 0.5 * (1 + std::cos(M_PI * step / steps)));  // cosine decay
    opt.step();
    const double loss = model.loss();
    if (step == 1) first_loss = avg = loss;
    avg = 0.95 * avg + 0.05 * loss;
    if (step % (tty ? 20 : 100) == 0 || step == steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double eta = secs / step * (steps - step);
      char line[160];
      std::snprintf(line, sizeof line, "step %4d/%d  loss %.4f  %6.0f samples/s  eta %4.1fs", step, steps, avg,
                    step * batch / secs, eta);
      if (tty) std::printf("\r%s", line), std::fflush(stdout);
      else std::printf("%s\n", line);
    }
  }
  if (tty) std::printf("\n");
  const double acc = accuracy(model, test, n_test);
  std::printf("loss %.4f -> %.4f; test accuracy %.1f%%\n", first_loss, avg, 100 * acc);
  return avg < first_loss ? 0 : 1;
}
