// The training library: the Trainer's interrupts, divergence and resuming, the log's cut back on
// resume, the run folder's rules and the config parser's strictness. The `ctgrad` command's own
// tests (tests/apps/cli_test.sh) cover the same through the command line.
#include <catch2/catch.hpp>

#include <signal.h>

#include <cerrno>
#include <csignal>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/training/config.hpp>
#include <ctgrad/training/trainer.hpp>

#include "../scratch.hpp"

using namespace ctgrad;
using Catch::Matchers::Contains;

namespace {

// y = W x + b with dropout on x: the dropout makes the RNG state part of what a resume restores.
constexpr auto regression = [] {
  Builder g;
  Value x = g.input("x", {Batch, 4});
  Value y = g.input("y", {Batch, 3});
  g.loss(mse(layers::linear(g.scope("fc"), dropout(x, g.hyper("dropout", 0.2)), 3), y));
  return g;
};
constexpr auto G = freeze<regression>();

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One model, optimizer and data stream; `nan_at` feeds a NaN at that step, `interrupt_at` raises
// SIGINT inside the validation of that step (after half of it ran).
struct Setup {
  Program<G> model{Options{.threads = 1, .seed = 3}};
  optim::AdamW<float> opt{model.parameters(), {.lr = 1e-2}};
  std::vector<float> x, y;
  std::int64_t nan_at = -1, interrupt_at = -1, step_now = 0;

  training::Run run() {
    return {.model = model,
            .optimizer = opt,
            .feed =
                [this](std::int64_t step) {
                  step_now = step;
                  x.assign(8 * 4, 0), y.assign(8 * 3, 0);
                  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.37 * double(step) + double(i)));
                  for (std::size_t i = 0; i < y.size(); ++i) y[i] = float(std::cos(0.11 * double(step) * double(i)));
                  if (step == nan_at) x[5] = std::nanf("");
                  model.set_input("x", std::span<const float>(x), {8, 4});
                  model.set_input("y", std::span<const float>(y), {8, 3});
                  return 8.0;
                },
            .validate = [this] {
              double total = 0;
              for (int part = 0; part < 4; ++part) {
                if (part == 2 && step_now == interrupt_at) std::raise(SIGINT);
                if (training::interrupted()) break;  // as a real validation loop does: stops early, its value is partial
                model.forward(Mode::infer);
                total += model.loss();
              }
              return training::Metrics{{{"loss", total / 4}}};
            }};
  }
};

training::LoopOptions loop_options() {
  return {.steps = 20, .eval_every = 5, .clip = 1.0, .unit = "mse", .items = "row", .metadata = {{"model", "regression"}}};
}

std::vector<std::int64_t> csv_steps(const std::filesystem::path& csv, std::vector<std::int64_t>* validated = nullptr) {
  std::vector<std::int64_t> steps;
  std::istringstream in(read_text(csv));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    steps.push_back(std::stoll(line.substr(0, line.find(','))));
    if (validated && line.back() != ',') validated->push_back(steps.back());
  }
  return steps;
}

}  // namespace

TEST_CASE("Trainer: an interrupt during a validation keeps the previous checkpoint, and the resumed run ends bit-identical",
          "[training]") {
  const auto dir_a = testing::scratch("trainer_straight"), dir_b = testing::scratch("trainer_interrupted");
  {
    Setup s;
    const training::RunFolder folder(dir_a);
    folder.start_new(true);
    training::Trainer t(folder, loop_options());
    training::Run r = s.run();
    const auto out = t.fit(r);
    REQUIRE_FALSE(out.interrupted);
    REQUIRE(out.last == 20);
  }
  {
    Setup s;
    s.interrupt_at = 10;
    const training::RunFolder folder(dir_b);
    folder.start_new(true);
    training::Trainer t(folder, loop_options());
    training::Run r = s.run();
    const auto out = t.fit(r);
    training::clear_interrupted();
    CHECK(out.interrupted);
    // The checkpoint is the one of step 5's validation; nothing of step 10 (its partial loss) is logged.
    const checkpoint::File f(folder.checkpoint());
    CHECK(f.metadata().at("optimizer_step") == "5");
    std::vector<std::int64_t> validated;
    const auto steps = csv_steps(folder.file("metrics.csv"), &validated);
    CHECK(steps.back() == 9);
    CHECK(validated == std::vector<std::int64_t>{5});
  }
  {
    Setup s;  // a fresh process would do the same: load, then fit from the step after the checkpoint's
    const training::RunFolder folder(dir_b);
    training::Trainer t(folder, loop_options());
    training::Run r = s.run();
    t.load(r);
    REQUIRE(s.opt.steps() == 5);
    const auto out = t.fit(r);
    CHECK(out.first == 6);
    CHECK(out.last == 20);
  }
  CHECK(read_text(dir_a / "checkpoint.safetensors") == read_text(dir_b / "checkpoint.safetensors"));
  std::vector<std::int64_t> va, vb;
  std::vector<std::int64_t> all(20);
  for (int i = 0; i < 20; ++i) all[std::size_t(i)] = i + 1;
  CHECK(csv_steps(dir_a / "metrics.csv", &va) == all);
  CHECK(csv_steps(dir_b / "metrics.csv", &vb) == all);  // each step once, in order
  CHECK(va == std::vector<std::int64_t>{5, 10, 15, 20});
  CHECK(vb == va);
}

TEST_CASE("Trainer: a non-finite loss stops training before its step is applied, keeping the last checkpoint", "[training]") {
  Setup s;
  s.nan_at = 8;
  const training::RunFolder folder(testing::scratch("trainer_nan"));
  folder.start_new(true);
  training::Trainer t(folder, loop_options());
  training::Run r = s.run();
  const auto out = t.fit(r);
  CHECK(out.diverged);
  CHECK(out.last == 7);
  CHECK(s.opt.steps() == 7);
  const checkpoint::File f(folder.checkpoint());
  CHECK(f.metadata().at("optimizer_step") == "5");
  for (const auto& p : s.model.parameters())
    for (std::int64_t i = 0; i < p.value.numel; ++i) REQUIRE(std::isfinite(p.value.data[i]));
}

TEST_CASE("Trainer from a program: the loss plot and a sample are written as the command writes them", "[training]") {
  Setup s;
  const training::RunFolder folder(testing::scratch("trainer_plot_sample"));
  folder.start_new(true);
  training::Trainer t(folder, loop_options());
  training::Run r = s.run();
  r.sample = [&] { return "weights after " + std::to_string(s.opt.steps()) + " steps"; };
  const auto out = t.fit(r);
  CHECK(out.sample == "weights after 20 steps");
  CHECK(read_text(folder.file("sample.txt")) == out.sample);
  if (std::filesystem::exists("/usr/bin/gnuplot")) {  // the plot needs gnuplot (scripts/setup.sh installs it)
    CHECK(out.plot == folder.file("loss.png"));
    CHECK(std::filesystem::file_size(out.plot) > 1000);
  }
  // Not drawn when asked not to; no sample after an interrupted run.
  const training::RunFolder quiet(testing::scratch("trainer_no_plot"));
  quiet.start_new(true);
  Setup s2;
  s2.interrupt_at = 10;
  auto o = loop_options();
  o.plot = false;
  training::Trainer t2(quiet, o);
  training::Run r2 = s2.run();
  r2.sample = [] { return std::string("never"); };
  const auto out2 = t2.fit(r2);
  training::clear_interrupted();
  CHECK(out2.interrupted);
  CHECK(out2.plot.empty());
  CHECK_FALSE(std::filesystem::exists(quiet.file("loss.png")));
  CHECK_FALSE(std::filesystem::exists(quiet.file("sample.txt")));
}

TEST_CASE("TrainingLog on resume: the jsonl keeps the valid records before the step, the CSV is rebuilt from them", "[training]") {
  const auto dir = testing::scratch("log_cut_back");
  std::filesystem::create_directories(dir);
  {
    std::ofstream j(dir / "metrics.jsonl");
    j << R"({"step":1,"loss":2.5,"lr":0.1,"row_per_s":10})" << "\n"
      << R"({"step":2,"loss":2.0,"lr":0.1,"row_per_s":11})" << "\n"
      << R"({"step":2,"train_seconds":1.5,"val_loss":1.75})" << "\n"
      << "garbage line\n"
      << R"({"step":1,"loss":9,"lr":0.1,"row_per_s":10})" << "\n"  // goes back in steps: dropped
      << R"([1,2,3])" << "\n"
      << R"({"step":3,"loss":1.5,"lr":0.1,"row_per_s":12})" << "\n"
      << R"({"step":4,"loss":1.0,"lr":0.1,"row_per_s":12})" << "\n"  // at or after the resumed step: cut
      << R"({"step":3,"loss":1.5,"lr":0.1,"ro)";                     // a torn last line
  }
  std::ofstream(dir / "metrics.csv") << "step,loss,lr,row_per_s,val_loss\n1,2,3\nnot a row\n";
  {
    training::TrainingLog log(dir, 4, 10, "mse", "row");
    log.close();
  }
  CHECK(read_text(dir / "metrics.csv") == "step,loss,lr,row_per_s,val_loss\n1,2.5,0.1,10,\n2,2,0.1,11,1.75\n3,1.5,0.1,12,\n");
  const std::string jsonl = read_text(dir / "metrics.jsonl");
  CHECK(std::count(jsonl.begin(), jsonl.end(), '\n') == 4);
  CHECK_THAT(jsonl, !Contains("garbage") && !Contains("\"loss\":9") && !Contains("\"step\":4"));

  std::filesystem::remove(dir / "metrics.csv");  // a deleted CSV comes back from the jsonl
  { training::TrainingLog(dir, 4, 10, "mse", "row").close(); }
  CHECK(read_text(dir / "metrics.csv") == "step,loss,lr,row_per_s,val_loss\n1,2.5,0.1,10,\n2,2,0.1,11,1.75\n3,1.5,0.1,12,\n");

  std::filesystem::remove(dir / "metrics.csv");
  std::filesystem::create_directory(dir / "metrics.csv");
  CHECK_THROWS_WITH(training::TrainingLog(dir, 4, 10, "mse", "row"), Contains("metrics.csv is not a regular file"));
}

TEST_CASE("TrainingLog of a new run: metrics files that are links are replaced, what they lead to kept", "[training]") {
  const auto dir = testing::scratch("log_links");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "mine.jsonl") << "my notes\n";
  std::filesystem::create_symlink(dir / "mine.jsonl", dir / "metrics.jsonl");
  std::filesystem::create_hard_link(dir / "mine.jsonl", dir / "metrics.csv");
  { training::TrainingLog(dir, 1, 10, "mse", "row").close(); }  // step 1: a new run, or a resume of a step-0 checkpoint
  CHECK(read_text(dir / "mine.jsonl") == "my notes\n");
  CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(dir / "metrics.jsonl")));
  CHECK(read_text(dir / "metrics.csv") == "step,loss,lr,row_per_s,val_loss\n");
}

TEST_CASE("RunFolder: refuses a folder holding a run, removes a dead writer's temporary files, names a bad path", "[training]") {
  const auto dir = testing::scratch("run_folder");
  const training::RunFolder folder(dir);
  folder.start_new(false);
  std::ofstream(folder.file("metrics.csv")) << "step\n";
  CHECK_THROWS_WITH(folder.start_new(false), Contains("holds files of a run without a checkpoint"));
  std::ofstream(folder.checkpoint()) << "x";
  CHECK_THROWS_WITH(folder.start_new(false), Contains("holds a run (checkpoint.safetensors): continue it with --resume"));
  // A temporary file of one of the run's files whose process no longer exists is removed; one of
  // a live process (this one) is left alone, and so is every name a run's writers do not make.
  const pid_t dead = testing::dead_pid();
  const std::string d = std::to_string(dead), me = std::to_string(::getpid());
  const auto stale = folder.file(".checkpoint.safetensors.tmp." + d + ".7"), stale_plot = folder.file(".loss.png.gp.tmp." + d + ".2"),
             live = folder.file(".checkpoint.safetensors.tmp." + me + ".7");
  std::vector<std::filesystem::path> kept{live};
  for (const std::string& name : std::vector<std::string>{".checkpoint.safetensors.tmp." + d, ".notes.tmp.2024-05-01", ".draft.tmp.4194305x", ".thesis.tmp.20240501.1",
                                 ".mine.tmp." + d + ".1", ".tmp." + d + ".1"})
    kept.push_back(folder.file(name));
  for (const auto& f : kept) std::ofstream(f) << "partial";
  for (const auto& f : {stale, stale_plot}) std::ofstream(f) << "partial";
  std::filesystem::create_directory(folder.file(".metrics.csv.tmp." + d + ".3"));  // a folder is not a temporary file
  kept.push_back(folder.file(".metrics.csv.tmp." + d + ".3"));
  folder.require_checkpoint();
  CHECK_FALSE(std::filesystem::exists(stale));
  CHECK_FALSE(std::filesystem::exists(stale_plot));
  for (const auto& f : kept) CHECK(std::filesystem::exists(f));
  for (const auto& f : kept) std::filesystem::remove(f);
  folder.start_new(true);
  CHECK_FALSE(std::filesystem::exists(folder.checkpoint()));
  // A run killed before its first checkpoint (mid-write of its metrics): a new run there removes
  // its temporaries, with --overwrite (its other files there) or without (none); a live writer's stays.
  const auto first_write = folder.file(".metrics.jsonl.tmp." + d + ".2"), live_write = folder.file(".metrics.jsonl.tmp." + me + ".2");
  for (const auto& f : {first_write, live_write}) std::ofstream(f) << "partial";
  std::ofstream(folder.file("run.json")) << "{}";
  folder.start_new(true);
  CHECK_FALSE(std::filesystem::exists(first_write));
  CHECK(std::filesystem::exists(live_write));
  std::ofstream(first_write) << "partial";
  folder.start_new(false);
  CHECK_FALSE(std::filesystem::exists(first_write));
  std::filesystem::remove(live_write);
  CHECK_THROWS_WITH(training::RunFolder(std::string(5000, 'x')), Contains("(5000 bytes)"));
}

TEST_CASE("Config: strict numbers, no wrap past 2^63, no NUL byte, bounded nesting, control bytes shown escaped", "[training][config]") {
  training::Schema s;
  s.integer("seed", 0, {.min = 0}, "seed").real("lr", 1e-3, {.min = 0, .min_open = true}, "lr").choice("size", "tiny", {"tiny", "small"}, "size");
  training::Config c = s.defaults();
  CHECK_THROWS_WITH(c.merge_json(R"({"seed": 18446744073709551615})", "f"), Contains("out of the 64-bit integer range"));
  CHECK_THROWS_WITH(c.merge_json(R"({"seed": 9223372036854775808})", "f"), Contains("out of the 64-bit integer range"));
  c.merge_json(R"({"seed": 9223372036854775807})", "f");
  CHECK(c.integer("seed") == INT64_MAX);
  CHECK_THROWS_WITH(c.merge_json(std::string_view("{\"seed\": 5}\0garbage", 19), "f"), Contains("NUL byte at offset 11"));
  CHECK_THROWS_WITH(c.merge_json(std::string(100, '[') + std::string(100, ']'), "f"), Contains("nests deeper than"));
  CHECK_THROWS_WITH(c.merge_json(R"({"size": "t\u0000iny"})", "f"), Contains("holds a control character (byte 0x00 at position 1): 't\\x00iny'"));
  CHECK_THROWS_WITH(c.set("seed=1e5", "--set"), Contains("expects an integer, got '1e5'"));
  CHECK_THROWS_WITH(c.set("lr=0", "--set"), Contains("must be in (0, inf)"));
  CHECK_THROWS_WITH(c.set("lr=nan", "--set"), Contains("expects a number"));
  CHECK_THROWS_WITH(c.merge_json("[1]", "f"), Contains("must be a JSON object"));
  c.merge_json(R"({"lr": "2e-3"})", "f");  // a number written as a string reads as the number
  CHECK(c.real("lr") == 2e-3);
  CHECK_THAT(s.describe(), Contains("(integer in [0, inf))"));
}

TEST_CASE("Training checkpoints: the checksum covers the metadata and is required, the first format loads with a warning",
          "[training][checkpoint]") {
  Program<G> model(Options{.threads = 1});
  const auto path = testing::scratch("ckpt_checksum.safetensors");
  checkpoint::save_training<float>(path, model, nullptr, {{"config", R"({"lr":0.001})"}});
  REQUIRE_NOTHROW(checkpoint::load_training<float>(path, model, nullptr));
  std::string bytes = read_text(path);
  const auto at = bytes.find("0.001");
  REQUIRE(at != std::string::npos);
  bytes[at + 4] = '2';  // one digit of the config
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  CHECK_THROWS_WITH(checkpoint::load_training<float>(path, model, nullptr), Contains("does not match its checksum"));

  // Without the checksum (written as another tool would): refused in the current format, read
  // with a warning in the first, refused in a format this version does not know.
  std::vector<checkpoint::TensorView> tensors;
  for (const auto& p : model.parameters())
    tensors.push_back(checkpoint::view_of<float>(std::string(p.name), std::span<const float>(p.value.span()),
                                                 std::vector<std::int64_t>(p.value.shape().begin(), p.value.shape().end())));
  for (const char* format : {"ctgrad-training-2", "ctgrad-training-1", "ctgrad-training-9"}) {
    checkpoint::save(path, tensors, {{"format", format}, {"rng_step", "0"}, {"rng_seed", "1"}});
    std::string b = read_text(path);
    const auto k = b.find("\"ctgrad_checksum\"");
    REQUIRE(k != std::string::npos);
    b.replace(k, 17, "\"ctgrad_xhecksum\"");  // same length: the header stays valid
    std::ofstream(path, std::ios::binary | std::ios::trunc) << b;
    INFO(format);
    if (std::string(format) == "ctgrad-training-1") CHECK_NOTHROW(checkpoint::load_training<float>(path, model, nullptr));
    else if (std::string(format) == "ctgrad-training-2") CHECK_THROWS_WITH(checkpoint::load_training<float>(path, model, nullptr), Contains("no checksum"));
    else CHECK_THROWS_WITH(checkpoint::load_training<float>(path, model, nullptr), Contains("is not one this version reads"));
  }
}
