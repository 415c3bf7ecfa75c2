// ctgrad train|eval vit: a Vision Transformer on Fashion-MNIST, or on a folder of a user's images
// (data=images:DIR, one subfolder per class), at any image size and channels (docs/models/vit.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <numeric>

#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/idx.hpp>
#include <ctgrad/data/image_folder.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/text_source.hpp>
#include <ctgrad/training/escape.hpp>

#include <ctgrad/data/pairs.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/vit.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>

#include <ctgrad/training/image_grid.hpp>
#include <ctgrad/training/plot_data.hpp>

#include <ctgrad/pretrained/hf_model.hpp>

#include "../task.hpp"

namespace ctgrad::cli {
namespace {

namespace in = models::vit_inputs;
namespace fs = std::filesystem;

// The preset's graph, frozen at run time: its hyperparameters are every size's.
const RuntimeGraph kHyperGraph = freeze(models::vit(models::kVitFast));

Schema vit_schema() {
  Schema s;
  s.choice("size", "fast", {"fast", "small", "tiny"}, "preset, a bundle of sizes any size key overrides: fast (4x4 patches of 7), small (7x7 of 4), tiny (tests)",
           Role::model)
      .choice("pool", "cls", {"cls", "mean"}, "classify from the class token, or the mean of the patches", Role::model)
      .integer("epochs", 25, {.min = 1, .max = 100000}, "passes over the training images")
      .integer("batch", 128, {.min = 1, .max = 1 << 20}, "images per step", Role::run)
      .integer("train_images", 60000, {.min = 1, .max = std::int64_t(1) << 31}, "training images used (the first n; all when fewer)", Role::run)
      .text("data", "fashion-mnist", "fashion-mnist, or images:DIR (one subfolder of PNG or JPEG images per class, named by it)", Role::run)
      .text("val_data", "", "data=images:DIR: the test images, images:DIR2 (empty: the images held out by val_fraction, by a hash of each file)", Role::run)
      .real("val_fraction", 0.1, {.min = 0, .max = 0.5, .min_open = true}, "data=images:DIR: the share of images held out", Role::run)
      .real("lr", 1e-3, {.min = 0, .max = 10, .min_open = true}, "peak learning rate (warm-up, then cosine)")
      .real("min_lr", 1e-5, {.min = 0, .max = 10}, "learning rate at the end")
      .real("warmup_epochs", 1.0, {.min = 0}, "warm-up, in epochs")
      .real("weight_decay", 0.05, {.min = 0, .max = 10}, "AdamW's decay (not on biases, norms, the class token and positions)")
      .flag("augment", false, "random shifts of up to 2 pixels and horizontal flips", Role::run);
  add_arch_keys(s, models::kVitFast.arch, false);
  std::vector<PresetSizes> sizes;
  for (const auto& [n, p] : {std::pair{"fast", models::kVitFast}, {"small", models::kVitSmall}, {"tiny", models::kVitTiny}})
    sizes.push_back({n, p.d_model, p.n_layer, p.d_mlp / p.d_model});
  add_size_keys(s, sizes);
  s.integer("patch", 0, {.min = 0, .max = 4096}, "architecture: the patches' side in pixels, dividing the image's (0: the preset's: fast 7, small 4, tiny 7)",
            Role::model)
      .integer("image", 0, {.min = 0, .max = 4096}, "architecture: the images' side in pixels, each scaled and centre-cropped to it (0: 28, Fashion-MNIST's)",
               Role::model)
      .integer("channels", 0, {.min = 0, .max = 3}, "architecture: 1 (grey) or 3 (RGB) (0: 1 for Fashion-MNIST, 3 for a folder)", Role::model);
  s.stated_when_set({"patch", "image", "channels", "data", "val_data", "val_fraction"});
  add_common_keys(s);
  add_hyper_keys(s, kHyperGraph);
  return s;
}

const std::vector<std::string> kFashionClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
constexpr float kMean = 0.2860f, kStd = 0.3530f;  // of the Fashion-MNIST training pixels

// The folder of data=images:DIR ("" for Fashion-MNIST).
std::string image_dir(const Config& c, const std::string& key = "data") {
  const std::string d = c.text(key);
  if (key == "data" && d == "fashion-mnist") return "";
  if (!d.starts_with("images:") || d.size() == 7)
    throw config_error(key + " " + training::printable(d) + ": " + (key == "data" ? "fashion-mnist or " : "") + "images:DIR (one subfolder of images per class)");
  return d.substr(7);
}

// Image i of the set, normalised, into out[channels * side * side]; with augmentation a random shift
// of up to 2 pixels (zero fill) and a horizontal flip, drawn from (seed, epoch, i): the same on a resume.
void image(const data::ImageSet& set, std::int64_t i, bool augment, std::uint64_t seed, std::uint64_t epoch, bool fashion, float* out) {
  int dx = 0, dy = 0;
  bool flip = false;
  if (augment) {
    const std::uint64_t k = random::key(seed, epoch, std::uint64_t(i));
    dx = int(random::bits(k, 0) % 5) - 2, dy = int(random::bits(k, 1) % 5) - 2, flip = random::bits(k, 2) & 1;
  }
  const int S = int(set.rows), C = int(set.channels);
  const float mean = fashion ? kMean : 0.5f, stdev = fashion ? kStd : 0.5f;  // a folder's pixels to [-1, 1]
  const std::uint8_t* px = set.pixels.data() + i * C * S * S;
  for (int ch = 0; ch < C; ++ch)
    for (int r = 0; r < S; ++r)
      for (int c = 0; c < S; ++c) {
        const int sr = r - dy, sc0 = c - dx, sc = flip ? S - 1 - sc0 : sc0;
        const float v = sr >= 0 && sr < S && sc >= 0 && sc < S ? float(px[(ch * S + sr) * S + sc]) / 255.0f : 0.0f;
        out[(ch * S + r) * S + c] = (v - mean) / stdev;
      }
}

// A grid of the first 24 test images with predicted and true labels (red when wrong), by gnuplot
// (an RGB image shown by its luminance).
bool prediction_grid(const data::ImageSet& test, const std::vector<std::int32_t>& pred, const std::vector<std::string>& classes, const std::string& what,
                     const fs::path& png) {
  std::vector<training::ImagePanel> panels;
  const std::int64_t S = test.rows, C = test.channels;
  auto name = [&](std::int32_t k) { return training::printable(classes[std::size_t(k)].substr(0, 14)); };
  for (std::int64_t i = 0; i < std::min<std::int64_t>(24, test.count); ++i) {
    std::vector<float> grey(std::size_t(S * S));
    const std::uint8_t* px = test.pixels.data() + i * C * S * S;
    for (std::int64_t p = 0; p < S * S; ++p)
      grey[std::size_t(p)] = C == 1 ? float(px[p]) : 0.299f * float(px[p]) + 0.587f * float(px[S * S + p]) + 0.114f * float(px[2 * S * S + p]);
    panels.push_back({.title = name(pred[std::size_t(i)]) + " / " + name(test.labels[std::size_t(i)]), .highlight = pred[std::size_t(i)] != test.labels[std::size_t(i)],
                      .values = {grey.begin(), grey.end()}});
  }
  const int grid_rows = int(std::max<std::size_t>(1, (panels.size() + 5) / 6));  // fewer than 24 held-out images: fewer rows
  return training::plot_image_grid(png,
                                   {.title = what + " images: predicted / true", .layout_rows = grid_rows, .layout_cols = 6, .width = 960,
                                    .height = 60 + 175 * grid_rows, .rows = int(S), .cols = int(S)},
                                   panels);
}

// The classes: Fashion-MNIST's; a trained run's (its checkpoint's "classes"); or the data folder's
// subfolders, sorted (read_image_folder checks them).
std::vector<std::string> vit_classes(const Config& c, const Context& ctx) {
  const std::string dir = image_dir(c);
  if (dir.empty()) {
    if (ctx.from_checkpoint && checkpoint::File(ctx.folder.checkpoint()).metadata().count("classes"))
      throw config_error("the run " + ctx.folder.dir().string() + " was trained on an image folder: data=fashion-mnist has other classes");
    return kFashionClasses;
  }
  if (ctx.from_checkpoint) return names_from_checkpoint(ctx.folder.checkpoint(), "classes");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw config_error("data " + training::printable(c.text("data")) + ": no such folder");
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (!e.path().filename().string().starts_with(".") && e.is_directory(ec)) {
      const std::string name = e.path().filename().string();
      if (data::invalid_utf8_at(name) != std::string::npos)
        throw config_error("class folder " + training::printable(e.path().string()) + ": its name is not UTF-8 (a class is named by its folder)");
      out.push_back(name);
    }
  std::sort(out.begin(), out.end());
  if (out.size() < 2) throw config_error("data " + training::printable(c.text("data")) + " has " + std::to_string(out.size()) + " class folder: a classifier needs two or more");
  return out;
}

// The config's model: a preset, its sizes and architecture overridden by the keys given.
models::VitConfig vit_config(const Config& c, int classes) {
  const models::VitConfig& p = c.text("size") == "tiny" ? models::kVitTiny : c.text("size") == "small" ? models::kVitSmall : models::kVitFast;
  models::VitConfig m = p;
  const bool fashion = image_dir(c).empty();
  m.image = size_or(c, "image", 28), m.channels = size_or(c, "channels", fashion ? 1 : 3), m.classes = classes;  // 28: every preset's patch divides it
  if (fashion && (m.image != 28 || m.channels != 1)) throw config_error("Fashion-MNIST's images are 28 x 28 grey: image 28, channels 1");
  if (m.channels == 2) throw config_error("channels 2: 1 (grey) or 3 (RGB)");
  m.d_model = size_or(c, "d_model", p.d_model), m.n_layer = size_or(c, "layers", p.n_layer), m.heads = size_or(c, "heads", p.heads);
  m.arch = arch_of(c, false);
  m.d_mlp = ff_width(c, m.d_model, p.d_mlp / p.d_model, false);  // the block gates it for swiglu
  m.patch = size_or(c, "patch", p.patch), m.mean_pool = c.text("pool") == "mean";
  if (m.image % m.patch) throw config_error("patch " + std::to_string(m.patch) + " does not divide the images' side of " + std::to_string(m.image) + " pixels");
  check_heads(m.d_model, m.heads, m.heads, false);
  return m;
}

class VitSession : public Session {
 public:
  VitSession(const Config& c, const Context& ctx)
      : c_(c), ctx_(ctx), classes_(vit_classes(c, ctx)), config_(vit_config(c, int(classes_.size()))), planned_(plan_model([this] { return models::vit(config_); })),
        model_(std::make_unique<Program<run_time>>(planned_, program_options(c, ctx.threads, planned_->graph()))), opt_(model_->parameters(), optim::AdamOptions{.lr = c.real("lr"), .weight_decay = c.real("weight_decay")},
             {optim::no_decay_group({"cls", "pos"})}),
        batch_(c.integer("batch")), n_train_(c.integer("train_images")), seed_(data_seed(c)) {
    if (n_train_ < batch_) throw config_error("train_images (" + c.show("train_images") + ") must be at least batch (" + c.show("batch") + ")");
    if (!ctx.pretrained.empty() && ctx.command != "train") {  // eval --from: the folder's classifier must be the data's
      const pretrained::HfModel folder = pretrained::read_hf_model(ctx.pretrained);
      const int theirs = folder.vit().classes;
      if (theirs != config_.classes)
        throw config_error("--from " + ctx.pretrained.string() + " classifies " + std::to_string(theirs) + " classes (its id2label), the data has " +
                           std::to_string(config_.classes) + ": train --from fine-tunes a new classifier on it");
      // Named classes (not transformers' LABEL_k defaults) must be the data's, in order.
      for (std::size_t k = 0; k < folder.labels.size() && k < classes_.size(); ++k)
        if (folder.labels[k] != classes_[k] && folder.labels[k] != "LABEL_" + std::to_string(k))
          throw config_error("--from " + ctx.pretrained.string() + ": its class " + std::to_string(k) + " is '" + folder.labels[k] + "', the data's is '" +
                             classes_[k] + "' (output k must be the same class): train --from fine-tunes a classifier on the data's");
    }
    check_fits(*model_, {batch_, 1, 1, 1, 1, 1}, 4.0 * double(pixels()) * double(batch_), "batch " + c.show("batch"));
    check_shards(ctx, batch_, "batch");
  }
  Executor<float>& model() override { return *model_; }
  optim::Optimizer<float>& optimizer() override { return opt_; }

  void prepare() override {
    const std::string dir = image_dir(c_);
    if (dir.empty()) {
      test_ = data::fashion_mnist("test");
      if (ctx_.command == "train") train_ = data::fashion_mnist("train");
    } else {
      try {
        data::ImageFolderOptions o{.size = config_.image, .channels = config_.channels, .classes = classes_, .val_fraction = c_.real("val_fraction")};
        const bool held = true, kept = false;
        const std::string val = c_.text("val_data").empty() ? "" : image_dir(c_, "val_data");
        test_ = (val.empty() ? data::read_image_folder(dir, o, &held) : data::read_image_folder(val, o)).images;
        if (ctx_.command == "train") train_ = data::read_image_folder(dir, o, val.empty() ? &kept : nullptr).images;
      } catch (const data::data_error& e) {
        throw config_error(message_of(e));
      }
      if (test_.count == 0) throw config_error("no test images: none is held out by val_fraction: give val_data=images:DIR or more images");
      if (ctx_.command == "train" && train_.count == 0) throw config_error("no training images: every image is held out");
    }
    if (ctx_.command != "train") return;
    if (!dir.empty() && n_train_ < train_.count) {  // a folder's images come class by class: a fixed random subset, not the first n
      std::vector<std::int64_t> keep(static_cast<std::size_t>(train_.count));
      std::iota(keep.begin(), keep.end(), std::int64_t(0));
      data::fixed_subset(keep, std::size_t(n_train_), "train_images");
      data::ImageSet kept{.count = n_train_, .rows = train_.rows, .cols = train_.cols, .channels = train_.channels};
      const std::size_t px = std::size_t(train_.channels * train_.rows * train_.cols);
      for (std::int64_t i : keep) {
        kept.pixels.insert(kept.pixels.end(), train_.pixels.begin() + std::ptrdiff_t(std::size_t(i) * px), train_.pixels.begin() + std::ptrdiff_t(std::size_t(i + 1) * px));
        kept.labels.push_back(train_.labels[std::size_t(i)]);
      }
      train_ = std::move(kept);
    }
    n_train_ = std::min(n_train_, train_.count);
    if (n_train_ < batch_) throw config_error("the " + std::to_string(n_train_) + " training images are fewer than batch " + c_.show("batch"));
    per_epoch_ = n_train_ / batch_;
    x_.resize(std::size_t(batch_ * pixels()));
    y_.resize(std::size_t(batch_));
    const auto& v = config_;
    std::printf("ctgrad train vit: %dx%d patches of %d, d_model %d, %d layers, %d heads, MLP %d, %s pooling (%s), %lld parameters, %d threads\n",
                v.image / v.patch, v.image / v.patch, v.patch, v.d_model, v.n_layer, v.heads, v.d_mlp, v.mean_pool ? "mean" : "<cls>",
                describe_arch(v.arch, false).c_str(), (long long)model_->parameter_count(), model_->threads());
    std::printf("%s: %lld train images (augment %s) / %lld test, %zu classes, %dx%d %s; %lld epochs of %lld steps, batch %lld\n", data_name().c_str(),
                (long long)n_train_, c_.flag("augment") ? "on" : "off", (long long)test_.count, classes_.size(), config_.image, config_.image,
                config_.channels == 1 ? "grey" : "RGB", (long long)c_.integer("epochs"), (long long)per_epoch_, (long long)batch_);
  }

  std::vector<std::string> metrics() const override { return {"error", "accuracy"}; }
  checkpoint::Metadata metadata() override {
    if (image_dir(c_).empty()) return {};
    return {{"classes", names_metadata(classes_)}};  // output k is classes_[k], for eval and resume
  }
  training::LoopOptions loop() override {
    const std::int64_t steps = c_.integer("epochs") * per_epoch_;
    return {.steps = steps,
            .eval_every = per_epoch_,
            .lr = optim::warmup_cosine(c_.real("lr"), c_.real("min_lr"), std::int64_t(c_.real("warmup_epochs") * double(per_epoch_)), steps),
            .unit = "(test error)",
            .items = "img"};
  }

  training::Run run() override {
    epoch_start_ = std::chrono::steady_clock::now();
    return {.model = *model_,
            .optimizer = opt_,
            .feed =
                [this](std::int64_t step) {
                  const std::int64_t epoch = (step - 1) / per_epoch_, k = (step - 1) % per_epoch_;
                  if (epoch != order_epoch_) order_ = data::shuffled(n_train_, seed_, std::uint64_t(epoch)), order_epoch_ = epoch;
                  for (std::int64_t b = ctx_.shard.begin(batch_); b < ctx_.shard.end(batch_); ++b) {
                    const std::int64_t i = order_[std::size_t(k * batch_ + b)];
                    image(train_, i, c_.flag("augment"), seed_, std::uint64_t(epoch), fashion(), x_.data() + b * pixels());
                    y_[std::size_t(b)] = train_.labels[std::size_t(i)];
                  }
                  // This rank's images of the batch (all of it in one process).
                  const std::int64_t first = ctx_.shard.begin(batch_), rows = ctx_.shard.rows(batch_);
                  model_->set_input(in::images, std::span<const float>(x_).subspan(std::size_t(first * pixels()), std::size_t(rows * pixels())),
                                    {rows, config_.channels, config_.image, config_.image});
                  model_->set_input(in::labels, std::span<const std::int32_t>(y_).subspan(std::size_t(first), std::size_t(rows)), {rows});
                  return double(rows);
                },
            .validate =
                [this] {
                  const double acc = accuracy(predict());
                  return training::Metrics{{{"error", 1 - acc}, {"accuracy", acc}}};
                },
            .validate_at = [this](std::int64_t step) { return step % per_epoch_ == 0; },
            .after_step = [this](std::int64_t, double loss) { epoch_loss_ += loss, ++epoch_steps_; },
            .after_validation =
                [this](std::int64_t step, const training::Metrics& m) {
                  const std::int64_t epoch = step / per_epoch_;
                  const bool partial = epoch_steps_ < per_epoch_;  // resumed mid-epoch: the part run here
                  const auto now = std::chrono::steady_clock::now();
                  const double secs = std::chrono::duration<double>(now - epoch_start_).count();
                  std::printf("epoch %lld: train loss %.4f, test accuracy %.2f%%, %.0f s%s\n", (long long)epoch, epoch_loss_ / double(epoch_steps_),
                              100 * m.values[1].second, secs, partial ? " (resumed mid-epoch: the part run here)" : "");
                  std::ostringstream log;
                  log << "{\"epoch\": " << epoch << ", \"train_loss\": " << epoch_loss_ / double(epoch_steps_) << ", \"test_accuracy\": "
                      << m.values[1].second << ", \"epoch_seconds\": " << secs << ", \"partial\": " << (partial ? "true" : "false") << "}\n";
                  if (std::string why; !training::append_to_regular_file(ctx_.folder.file("epochs.jsonl"), log.str(), why))
                    std::fprintf(stderr, "ctgrad: warning: %s: %s: the epoch's record is not written\n",
                                 training::printable(ctx_.folder.file("epochs.jsonl").string()).c_str(), why.c_str());
                  epoch_steps_ = 0, epoch_loss_ = 0, epoch_start_ = now;
                }};
  }

  int after_training(const training::Outcome& out) override {
    if (out.last_validation.values.size() > 1) std::printf("test accuracy %.2f%%\n", 100 * out.last_validation.values[1].second);
    return 0;
  }

  int eval(const Config&) override {

    const auto t0 = std::chrono::steady_clock::now();
    const auto pred = predict();
    if (training::interrupted()) return 130;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("test accuracy %.2f%% (%lld images, %.1f s)\n\nconfusion matrix (rows: true class, columns: predicted)\n", 100 * accuracy(pred),
                (long long)test_.count, secs);
    const std::size_t n = classes_.size();
    std::vector<std::int64_t> cm(n * n);
    for (std::int64_t i = 0; i < test_.count; ++i) ++cm[std::size_t(test_.labels[std::size_t(i)]) * n + std::size_t(pred[std::size_t(i)])];
    if (n <= 20) {  // a larger matrix would not be read
      std::printf("%13s", "");
      for (std::size_t c = 0; c < n; ++c) std::printf(" %5zu", c);
      std::printf("   recall\n");
      for (std::size_t r = 0; r < n; ++r) {
        std::int64_t row = 0;
        std::printf("%zu %-11.11s", r, training::printable(classes_[r]).c_str());
        for (std::size_t c = 0; c < n; ++c) std::printf(" %5lld", (long long)cm[r * n + c]), row += cm[r * n + c];
        std::printf("   %5.1f%%\n", 100.0 * double(cm[r * n + r]) / double(std::max<std::int64_t>(row, 1)));
      }
    }
    if (!ctx_.pretrained.empty()) return 0;  // --from: the run folder is not this model's, the grid is not written into it
    if (prediction_grid(test_, pred, classes_, data_name() + (fashion() ? " test" : " held-out"), ctx_.folder.file("predictions.png")))
      std::printf("\nwrote %s\n", training::printable(ctx_.folder.file("predictions.png").string()).c_str());
    return 0;
  }

 private:
  // Predictions of the whole test set.
  std::vector<std::int32_t> predict() {
    std::vector<std::int32_t> pred(std::size_t(test_.count));
    std::vector<float> x;
    std::vector<std::int32_t> y;
    const EvalShard shard{ctx_.comm};
    for (std::int64_t b0 = 0; b0 < test_.count && !training::interrupted(); b0 += 500) {
      if (!shard.mine(b0 / 500)) continue;
      const std::int64_t n = std::min<std::int64_t>(500, test_.count - b0);
      x.resize(std::size_t(n * pixels()));
      y.assign(test_.labels.begin() + b0, test_.labels.begin() + b0 + n);
      for (std::int64_t i = 0; i < n; ++i) image(test_, b0 + i, false, 0, 0, fashion(), x.data() + i * pixels());
      model_->set_input(in::images, std::span<const float>(x), {n, config_.channels, config_.image, config_.image});
      model_->set_input(in::labels, std::span<const std::int32_t>(y), {n});
      model_->forward(Mode::infer);
      const auto l = model_->output("logits");
      const std::int64_t k = config_.classes;
      for (std::int64_t i = 0; i < n; ++i)
        pred[std::size_t(b0 + i)] = std::int32_t(std::max_element(l.data + i * k, l.data + i * k + k) - (l.data + i * k));
    }
    if (shard.comm) {  // each rank's predictions, the others' 0: summed, all of them
      std::vector<double> all(pred.begin(), pred.end());
      shard.sum(all);
      for (std::size_t i = 0; i < all.size(); ++i) pred[i] = std::int32_t(all[i]);
    }
    return pred;
  }
  double accuracy(const std::vector<std::int32_t>& pred) const {
    std::int64_t right = 0;
    for (std::int64_t i = 0; i < test_.count; ++i) right += pred[std::size_t(i)] == test_.labels[std::size_t(i)];
    return double(right) / double(test_.count);
  }

  bool fashion() const { return image_dir(c_).empty(); }
  std::string data_name() const { return fashion() ? "Fashion-MNIST" : training::printable(image_dir(c_)); }
  std::int64_t pixels() const { return std::int64_t(config_.channels) * config_.image * config_.image; }

  Config c_;
  Context ctx_;
  std::vector<std::string> classes_;
  models::VitConfig config_;
  std::shared_ptr<const PlannedGraph> planned_;
  std::unique_ptr<Executor<float>> model_;
  optim::AdamW<float> opt_;
  std::int64_t batch_, n_train_, per_epoch_ = 1;
  std::uint64_t seed_;
  data::ImageSet train_, test_;
  std::vector<float> x_;
  std::vector<std::int32_t> y_;
  std::vector<std::int64_t> order_;
  std::int64_t order_epoch_ = -1, epoch_steps_ = 0;
  double epoch_loss_ = 0;
  std::chrono::steady_clock::time_point epoch_start_;
};

Task vit_task() {
  Task t;
  t.name = "vit";
  t.summary = "Vision Transformer on Fashion-MNIST or your image folders (data=images:DIR): test accuracy, confusion matrix, prediction grid";
  t.input_folders = {"data", "val_data"};
  t.schema = vit_schema();
  t.data_parallel = true;
  t.open = &open_session<VitSession>;
  t.from_hf = [](const fs::path&, const pretrained::HfModel& m) -> std::vector<std::pair<std::string, std::string>> {
    if (!m.is_vit()) throw config_error("the folder holds a " + m.architecture + ": ctgrad's vit reads ViTForImageClassification folders (" + command_reading(m) + ")");
    const models::VitConfig& v = m.vit();
    return {{"d_model", std::to_string(v.d_model)}, {"layers", std::to_string(v.n_layer)}, {"heads", std::to_string(v.heads)},
            {"d_ff", std::to_string(v.d_mlp)},      {"patch", std::to_string(v.patch)},     {"image", std::to_string(v.image)},
            {"channels", std::to_string(v.channels)}, {"norm", "pre"},                     {"norm_kind", "layer"},
            {"act", "gelu"},                        {"pos", "learned"},                     {"pool", "cls"},
            {"norm_eps", exact(m.hyper("norm_eps", 1e-12))}};
  };
  t.to_hf = [](const Config& c, const Context& ctx, pretrained::HfModel& m) {
    const std::vector<std::string> classes = vit_classes(c, ctx);
    m = pretrained::hf_model_of(vit_config(c, int(classes.size())), {{"norm_eps", c.real("norm_eps")}, {"dropout", c.real("dropout")}});
    m.labels = classes;
  };
  t.hf_head = [](std::string_view n) { return n.rfind("head.", 0) == 0; };  // another class count: a new classifier
  return t;
}

const bool registered = register_task(vit_task());

}  // namespace
}  // namespace ctgrad::cli
