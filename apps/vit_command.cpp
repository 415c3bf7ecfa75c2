// ctgrad train|eval vit: a Vision Transformer on Fashion-MNIST (docs/models/vit.md).
#include <algorithm>

#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/data/idx.hpp>
#include <ctgrad/data/pairs.hpp>
#include <ctgrad/graph/random.hpp>
#include <ctgrad/models/vit.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>

#include "cli.hpp"

namespace ctgrad::cli {
namespace {

json default_config() {
  return {{"size", "fast"}, {"pool", "cls"},       {"epochs", 25},   {"batch", 128}, {"lr", 1e-3},
          {"min_lr", 1e-5},  {"warmup_epochs", 1.0}, {"weight_decay", 0.05}, {"augment", 0}, {"seed", 1},
          {"train_images", 60000}};
}

constexpr const char* kClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
constexpr float kMean = 0.2860f, kStd = 0.3530f;  // of the Fashion-MNIST training pixels

// Image i of the set, normalised, into out[784]; with augmentation a random shift of up to 2
// pixels (zero fill) and a horizontal flip, drawn from (seed, epoch, i): the same on a resume.
void image(const data::ImageSet& set, std::int64_t i, bool augment, std::uint64_t seed, std::uint64_t epoch, float* out) {
  int dx = 0, dy = 0;
  bool flip = false;
  if (augment) {
    const std::uint64_t k = random::key(seed, epoch, std::uint64_t(i));
    dx = int(random::bits(k, 0) % 5) - 2, dy = int(random::bits(k, 1) % 5) - 2, flip = random::bits(k, 2) & 1;
  }
  const std::uint8_t* px = set.pixels.data() + i * 784;
  for (int r = 0; r < 28; ++r)
    for (int c = 0; c < 28; ++c) {
      const int sr = r - dy, sc0 = c - dx, sc = flip ? 27 - sc0 : sc0;
      const float v = sr >= 0 && sr < 28 && sc >= 0 && sc < 28 ? float(px[sr * 28 + sc]) / 255.0f : 0.0f;
      out[r * 28 + c] = (v - kMean) / kStd;
    }
}

template <models::VitConfig P>
struct Graph {
  static constexpr auto g = freeze<models::vit<P>>();
};

// Predictions of the whole test set.
template <class M>
std::vector<std::int32_t> predict(M& model, const data::ImageSet& test) {
  std::vector<std::int32_t> pred(std::size_t(test.count));
  std::vector<float> x;
  std::vector<std::int32_t> y;
  for (std::int64_t b0 = 0; b0 < test.count; b0 += 500) {
    const std::int64_t n = std::min<std::int64_t>(500, test.count - b0);
    x.resize(std::size_t(n * 784));
    y.assign(test.labels.begin() + b0, test.labels.begin() + b0 + n);
    for (std::int64_t i = 0; i < n; ++i) image(test, b0 + i, false, 0, 0, x.data() + i * 784);
    model.set_input("images", std::span<const float>(x), {n, 1, 28, 28});
    model.set_input("labels", std::span<const std::int32_t>(y), {n});
    model.forward(Mode::infer);
    const auto l = model.output("logits");
    for (std::int64_t i = 0; i < n; ++i) pred[std::size_t(b0 + i)] = std::int32_t(std::max_element(l.data + i * 10, l.data + i * 10 + 10) - (l.data + i * 10));
  }
  return pred;
}

double accuracy_of(const std::vector<std::int32_t>& pred, const data::ImageSet& test) {
  std::int64_t right = 0;
  for (std::int64_t i = 0; i < test.count; ++i) right += pred[std::size_t(i)] == test.labels[std::size_t(i)];
  return double(right) / double(test.count);
}

// A grid of the first 24 test images with predicted and true labels (red when wrong), by gnuplot.
void prediction_grid(const data::ImageSet& test, const std::vector<std::int32_t>& pred, const fs::path& png) {
  if (!fs::exists("/usr/bin/gnuplot")) {
    std::cerr << "ctgrad: warning: gnuplot not installed (apt-get install gnuplot-nox): no " << png << "\n";
    return;
  }
  const fs::path data = png.string() + ".dat", script = png.string() + ".gp";
  {
    std::ofstream f(data);
    for (int i = 0; i < 24; ++i) {
      for (int r = 0; r < 28; ++r)
        for (int c = 0; c < 28; ++c) f << int(test.pixels[std::size_t(i * 784 + r * 28 + c)]) << (c < 27 ? " " : "\n");
      f << "\n\n";
    }
  }
  std::ofstream s(script);
  s << "set terminal pngcairo noenhanced size 960,760 font ',9'\nset output '" << png.string() << "'\n"
    << "set multiplot layout 4,6 title 'Fashion-MNIST test images: predicted / true'\nset palette grey negative\nunset colorbox\n"
    << "unset xtics\nunset ytics\nset size ratio -1\nset yrange [27.5:-0.5]\nset xrange [-0.5:27.5]\n";
  for (int i = 0; i < 24; ++i) {
    const bool ok = pred[std::size_t(i)] == test.labels[std::size_t(i)];
    s << "set title '" << kClasses[pred[std::size_t(i)]] << " / " << kClasses[test.labels[std::size_t(i)]] << "' tc rgb '"
      << (ok ? "black" : "red") << "'\nplot '" << data.string() << "' index " << i << " matrix with image pixels notitle\n";
  }
  s << "unset multiplot\n";
  s.close();
  if (std::system(("/usr/bin/gnuplot " + script.string() + " 2>&1").c_str()) != 0) std::cerr << "ctgrad: warning: gnuplot failed to draw " << png << "\n";
  fs::remove(data), fs::remove(script);
}

template <models::VitConfig P>
int run(const Args& a, const json& cfg) {
  static constexpr const auto& G = Graph<P>::g;
  const fs::path dir = a.run_dir, ckpt = dir / "checkpoint.safetensors";
  const std::int64_t epochs = cfg["epochs"], batch = cfg["batch"], n_train = cfg["train_images"];
  const std::uint64_t seed = cfg["seed"];
  if (epochs < 1 || batch < 1 || n_train < batch || n_train > 60000)
    throw usage_error("epochs and batch must be >= 1 and train_images in [batch, 60000]");
  Program<G> model(Options().threads(a.threads).seed(seed));
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions().lr(cfg["lr"]).weight_decay(cfg["weight_decay"]),
                          {optim::Group{"no_decay",
                                        [](std::string_view n) {
                                          return n.ends_with(".bias") || n.find("ln_") != std::string_view::npos ||
                                                 n.find("norm") != std::string_view::npos || n == "cls" || n == "pos";
                                        },
                                        1.0, 0.0}});
  const bool from_checkpoint = a.command != "train" || a.resume;
  if (from_checkpoint) checkpoint::load_training<float>(ckpt, model, &opt);
  else fs::create_directories(dir);
  const data::ImageSet train = data::fashion_mnist("train"), test = data::fashion_mnist("test");

  if (a.command == "eval") {
    const auto t0 = std::chrono::steady_clock::now();
    const auto pred = predict(model, test);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("test accuracy %.2f%% (%lld images, %.1f s)\n\nconfusion matrix (rows: true class, columns: predicted)\n",
                100 * accuracy_of(pred, test), (long long)test.count, secs);
    std::int64_t cm[10][10] = {};
    for (std::int64_t i = 0; i < test.count; ++i) ++cm[test.labels[std::size_t(i)]][pred[std::size_t(i)]];
    std::printf("%13s", "");
    for (int c = 0; c < 10; ++c) std::printf(" %5d", c);
    std::printf("   recall\n");
    for (int r = 0; r < 10; ++r) {
      std::int64_t row = 0;
      std::printf("%d %-11s", r, kClasses[r]);
      for (int c = 0; c < 10; ++c) std::printf(" %5lld", (long long)cm[r][c]), row += cm[r][c];
      std::printf("   %5.1f%%\n", 100.0 * double(cm[r][r]) / double(std::max<std::int64_t>(row, 1)));
    }
    prediction_grid(test, pred, dir / "predictions.png");
    std::printf("\nwrote %s\n", (dir / "predictions.png").c_str());
    return 0;
  }
  if (a.command != "train") throw usage_error("vit has no command '" + a.command + "' (train, eval)");

  const std::int64_t per_epoch = n_train / batch, steps = epochs * per_epoch;
  const auto schedule = optim::warmup_cosine(cfg["lr"], cfg["min_lr"], std::int64_t(cfg["warmup_epochs"].get<double>() * double(per_epoch)), steps);
  std::size_t n_params = 0;
  for (const auto& p : model.parameters()) n_params += std::size_t(p.value.numel);
  std::printf("ctgrad train vit: %dx%d patches of %d, d_model %d, %d layers, %d heads, MLP %d, %s pooling, %zu parameters, %d threads\n",
              P.image / P.patch, P.image / P.patch, P.patch, P.d_model, P.n_layer, P.heads, P.d_mlp, P.mean_pool ? "mean" : "<cls>", n_params,
              model.threads());
  std::printf("Fashion-MNIST: %lld train images (augment %s) / %lld test; %lld epochs of %lld steps, batch %lld\n", (long long)n_train,
              cfg["augment"].get<int>() ? "on" : "off", (long long)test.count, (long long)epochs, (long long)per_epoch, (long long)batch);
  const std::int64_t first = opt.steps() + 1;
  if (first > steps) {
    std::printf("the checkpoint in %s is already at step %lld of %lld: nothing to train\n", dir.c_str(), (long long)opt.steps(), (long long)steps);
    return 0;
  }
  if (first > 1) std::printf("resuming at step %lld from %s\n", (long long)first, ckpt.c_str());
  auto save = [&] { checkpoint::save_training<float>(ckpt, model, &opt, {{"config", cfg.dump()}, {"model", "vit"}}); };
  TrainingLog log(dir, a.resume, first, steps, "(test error)", "img");
  std::ofstream epochs_log(dir / "epochs.jsonl", a.resume ? std::ios::app : std::ios::trunc);
  std::vector<float> x(static_cast<std::size_t>(batch * 784));
  std::vector<std::int32_t> y(static_cast<std::size_t>(batch));
  std::vector<std::int64_t> order;
  std::int64_t order_epoch = -1;
  double epoch_loss = 0, epoch_start = log.seconds();
  std::int64_t epoch_steps = 0;  // of this epoch in this process (a resume may start mid-epoch)
  double last_acc = -1;
  for (std::int64_t step = first; step <= steps; ++step) {
    const std::int64_t epoch = (step - 1) / per_epoch, k = (step - 1) % per_epoch;
    if (epoch != order_epoch) order = data::shuffled(n_train, seed, std::uint64_t(epoch)), order_epoch = epoch;
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t i = order[std::size_t(k * batch + b)];
      image(train, i, cfg["augment"].get<int>() != 0, seed, std::uint64_t(epoch), x.data() + b * 784);
      y[std::size_t(b)] = train.labels[std::size_t(i)];
    }
    model.set_input("images", std::span<const float>(x), {batch, 1, 28, 28});
    model.set_input("labels", std::span<const std::int32_t>(y), {batch});
    model.zero_grad();
    model.forward();
    model.backward();
    opt.set_lr(schedule(step));
    model.execute([&] { opt.step(); });  // on the model's --threads
    const double loss = model.loss();
    epoch_loss += loss, ++epoch_steps;
    std::optional<double> err;
    if (k == per_epoch - 1) {  // end of an epoch: test accuracy, checkpoint
      last_acc = log.untimed([&] { return accuracy_of(predict(model, test), test); });
      err = 1 - last_acc;
    }
    log.step(step, loss, opt.lr(), double(batch), err);
    if (err) {
      const double secs = log.seconds() - epoch_start;
      epoch_start = log.seconds();
      const bool partial = epoch_steps < per_epoch;  // resumed mid-epoch: loss and time of the resumed part
      std::printf("epoch %lld: train loss %.4f, test accuracy %.2f%%, %.0f s of training%s\n", (long long)(epoch + 1),
                  epoch_loss / double(epoch_steps), 100 * last_acc, secs, partial ? " (resumed mid-epoch: the part run here)" : "");
      epochs_log << json{{"epoch", epoch + 1}, {"train_loss", epoch_loss / double(epoch_steps)}, {"test_accuracy", last_acc},
                         {"epoch_seconds", secs}, {"partial", partial}, {"train_seconds_this_process", log.seconds()}}.dump() << "\n";
      epochs_log.flush();
      epoch_loss = 0, epoch_steps = 0;
      log.untimed([&] { return save(), 0; });
    }
    if (stop_on_interrupt(step, save, ckpt)) return 130;
  }
  log.close();
  plot(dir / "metrics.csv", dir / "loss.png", "nats; validation: test error");
  std::printf("done after %s of training: test accuracy %.2f%%; checkpoint %s, plot %s\n", fmt_time(log.seconds()).c_str(), 100 * last_acc,
              ckpt.c_str(), (dir / "loss.png").c_str());
  return 0;
}

}  // namespace

int vit_command(const Args& a) {
  if (a.command == "sample") throw usage_error("vit has no command 'sample' (train, eval)");
  const fs::path ckpt = fs::path(a.run_dir) / "checkpoint.safetensors";
  json cfg = apply_sets(default_config(), a);
  if (a.command != "train" || a.resume) {
    const json saved = checkpoint_config(ckpt, "vit");
    if (a.command == "train") require_same(saved, cfg, {"size", "pool", "batch", "train_images", "seed", "augment"}, a.run_dir);
    else cfg = apply_sets(saved, a);
    if (saved["size"] != cfg["size"] || saved["pool"] != cfg["pool"])
      throw usage_error("the checkpoint in " + a.run_dir + " is a vit of size " + saved["size"].get<std::string>() + " with " +
                        saved["pool"].get<std::string>() + " pooling");
  }
  const std::string size = cfg["size"], pool = cfg["pool"];
  if (pool != "cls" && pool != "mean") throw usage_error("unknown pool '" + pool + "' (cls, mean)");
  if (size == "fast") return pool == "cls" ? run<models::kVitFast>(a, cfg) : run<models::VitConfig{.patch = 7, .mean_pool = true}>(a, cfg);
  if (size == "small" && pool == "cls") return run<models::kVitSmall>(a, cfg);
  if (size == "tiny" && pool == "cls") return run<models::kVitTiny>(a, cfg);
  throw usage_error("unknown size '" + size + "' (sizes: fast; small and tiny with cls pooling)");
}

}  // namespace ctgrad::cli
