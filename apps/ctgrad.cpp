// The ctgrad command:
//   ctgrad train <model> [--config file.json] [--set key=value ...] [--run DIR] [--resume] [--threads N]
//   ctgrad eval <model> [--run DIR] [--threads N]
//   ctgrad sample <model> [--run DIR] [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S]
// Models: charlm (a small character-level transformer LM on the KJV Bible).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/graph/random.hpp>
#include <ctgrad/models/charlm.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ctgrad;

namespace {

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::atomic<bool> g_interrupted{false};
void on_sigint(int) { g_interrupted = true; }

json default_config() {
  return {{"size", "tiny"}, {"steps", 1000},     {"batch", 16},          {"context", 64},    {"lr", 3e-3},
          {"min_lr", 3e-4}, {"warmup", 50},     {"weight_decay", 0.1},  {"clip", 1.0},      {"seed", 1},
          {"eval_every", 100}, {"eval_batches", 8}};
}

// Applies "key=value" with the type of the default; unknown keys are an error listing the known.
void set_key(json& cfg, const std::string& kv) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos) throw usage_error("--set expects key=value, got '" + kv + "'");
  const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
  if (!cfg.contains(key)) {
    std::string known;
    for (auto it = cfg.begin(); it != cfg.end(); ++it) known += (known.empty() ? "" : ", ") + it.key();
    throw usage_error("unknown config key '" + key + "' (known: " + known + ")");
  }
  try {
    if (cfg[key].is_string()) cfg[key] = value;
    else if (cfg[key].is_number_integer()) {
      std::size_t used = 0;
      cfg[key] = std::stoll(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } else {
      std::size_t used = 0;
      cfg[key] = std::stod(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    }
  } catch (const std::logic_error&) {
    throw usage_error("config key '" + key + "' expects a " + std::string(cfg[key].type_name()) + ", got '" + value + "'");
  }
}

struct Args {
  std::string command, model, run_dir, prompt = "And God said", config_file;
  std::vector<std::string> sets;
  bool resume = false;
  int threads = 0, tokens = 200, top_k = 0;
  double temperature = 0.8;
  std::uint64_t seed = 1;
};

Args parse(int argc, char** argv) {
  if (argc < 3) throw usage_error("usage: ctgrad train|eval|sample <model> [options] (models: charlm)");
  Args a;
  a.command = argv[1], a.model = argv[2];
  if (a.command != "train" && a.command != "eval" && a.command != "sample") throw usage_error("unknown command '" + a.command + "'");
  if (a.model != "charlm") throw usage_error("unknown model '" + a.model + "' (models: charlm)");
  a.run_dir = "runs/" + a.model;
  for (int i = 3; i < argc; ++i) {
    const std::string o = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw usage_error(o + " needs a value");
      return argv[++i];
    };
    if (o == "--config") a.config_file = value();
    else if (o == "--set") a.sets.push_back(value());
    else if (o == "--run") a.run_dir = value();
    else if (o == "--resume") a.resume = true;
    else if (o == "--threads") a.threads = std::stoi(value());
    else if (o == "--prompt") a.prompt = value();
    else if (o == "--tokens") a.tokens = std::stoi(value());
    else if (o == "--temperature") a.temperature = std::stod(value());
    else if (o == "--top-k") a.top_k = std::stoi(value());
    else if (o == "--seed") a.seed = std::stoull(value());
    else throw usage_error("unknown option '" + o + "'");
  }
  return a;
}

std::string fmt_time(double s) {
  char b[32];
  if (s >= 60) std::snprintf(b, sizeof b, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(b, sizeof b, "%.0fs", s);
  return b;
}

// Loss curve to PNG with gnuplot, headless. A missing gnuplot is a warning, not a failure.
void plot(const fs::path& csv, const fs::path& png) {
  if (!fs::exists("/usr/bin/gnuplot")) {
    std::cerr << "ctgrad: warning: gnuplot not installed (apt-get install gnuplot-nox): no " << png << "\n";
    return;
  }
  const std::string cmd = "/usr/bin/gnuplot -e \"set terminal png size 800,500; set output '" + png.string() +
                          "'; set datafile separator ','; set key autotitle columnhead; set xlabel 'step'; set ylabel 'loss (nats/char)';"
                          " plot '" + csv.string() + "' using 1:2 with lines title 'train', '' using 1:5 with linespoints title 'validation'\" 2>&1";
  if (std::system(cmd.c_str()) != 0) std::cerr << "ctgrad: warning: gnuplot failed to draw " << png << "\n";
}

template <models::CharLmPreset P>
struct CharLm {
  static constexpr auto G = freeze<models::charlm<P>>();
};

template <models::CharLmPreset P>
int run_charlm(const Args& a, json cfg);

template <models::CharLmPreset P>
int run_charlm(const Args& a, json cfg) {
  static constexpr const auto& G = CharLm<P>::G;
  const fs::path dir = a.run_dir, ckpt = dir / "checkpoint.safetensors", tok_file = dir / "tokenizer.json";
  const std::int64_t context = cfg["context"], batch = cfg["batch"];
  if (context < 2 || context > P.max_context)
    throw usage_error("context " + std::to_string(context) + " is outside [2, " + std::to_string(P.max_context) +
                      "] for size " + cfg["size"].get<std::string>());

  Program<G> model(Options().threads(a.threads).seed(cfg["seed"].get<std::uint64_t>()));
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions().lr(cfg["lr"]).betas(0.9, 0.99).weight_decay(cfg["weight_decay"]),
                          {optim::no_decay_group()});

  if (a.command == "sample" || a.command == "eval" || a.resume) {
    if (!fs::exists(ckpt)) throw usage_error("no checkpoint in " + dir.string() + " (train first)");
    const checkpoint::File peek(ckpt);  // which model and size, before loading any tensor
    if (!peek.metadata().count("config") || peek.metadata().at("model") != "charlm")
      throw usage_error(ckpt.string() + " is not a charlm checkpoint");
    const json saved = json::parse(peek.metadata().at("config"));
    if (saved["size"] != cfg["size"] && a.command == "train")
      throw usage_error("the checkpoint in " + dir.string() + " is of size " + saved["size"].get<std::string>() + ", not " +
                        cfg["size"].get<std::string>());
    if (a.command != "train" && saved["size"] != cfg["size"]) {  // eval/sample follow the checkpoint
      Args b = a;
      json c = saved;
      return saved["size"] == "small" ? run_charlm<models::kCharLmSmall>(b, c) : run_charlm<models::kCharLmTiny>(b, c);
    }
    checkpoint::load_training<float>(ckpt, model, &opt);
    if (a.command != "train") cfg = saved;
  }
  data::CharTokenizer tok = fs::exists(tok_file) && (a.resume || a.command != "train")
                                ? data::CharTokenizer::load(tok_file)
                                : data::CharTokenizer::train(data::split_text(data::kjv_text()).train);
  if (tok.vocab_size() > P.vocab) throw usage_error("the text has " + std::to_string(tok.vocab_size()) + " characters, more than the model's vocabulary");

  if (a.command == "sample") {
    std::vector<std::int32_t> ids = tok.encode(a.prompt);
    if (ids.empty()) throw usage_error("the prompt is empty");
    std::string out = a.prompt;
    const std::uint64_t key = random::key(a.seed, "sample");
    for (int t = 0; t < a.tokens; ++t) {
      const std::int64_t n = std::min<std::int64_t>(std::int64_t(ids.size()), context);
      std::vector<std::int32_t> window(ids.end() - n, ids.end()), none(std::size_t(n), 0);
      model.set_input("ids", std::span<const std::int32_t>(window), {1, n});
      model.set_input("targets", std::span<const std::int32_t>(none), {1, n});
      model.forward(Mode::infer);
      const float* logits = model.output("logits").data + (n - 1) * P.vocab;
      std::vector<double> p(std::size_t(tok.vocab_size()));
      double mx = -1e30;
      for (int v = 0; v < tok.vocab_size(); ++v) mx = std::max(mx, double(logits[v]) / a.temperature);
      std::vector<double> sorted;
      for (int v = 0; v < tok.vocab_size(); ++v) sorted.push_back(logits[v]);
      std::sort(sorted.rbegin(), sorted.rend());
      const double cut = a.top_k > 0 && a.top_k < tok.vocab_size() ? sorted[std::size_t(a.top_k - 1)] : -1e30;
      double total = 0;
      for (int v = 0; v < tok.vocab_size(); ++v) total += p[std::size_t(v)] = logits[v] >= cut ? std::exp(double(logits[v]) / a.temperature - mx) : 0;
      double u = random::uniform(key, std::uint64_t(t)) * total;
      int next = tok.vocab_size() - 1;
      for (int v = 0; v < tok.vocab_size(); ++v)
        if ((u -= p[std::size_t(v)]) <= 0) {
          next = v;
          break;
        }
      ids.push_back(next);
      out += tok.decode({next});
    }
    std::cout << out << "\n";
    return 0;
  }

  const data::TextSplit split = data::split_text(data::kjv_text());
  const std::vector<std::int32_t> train_ids = tok.encode(split.train), val_ids = tok.encode(split.validation);
  data::LmBatches train_batches(train_ids, context, batch, cfg["seed"].get<std::uint64_t>());
  data::LmBatches val_batches(val_ids, context, batch, 12345);
  auto validation_loss = [&]() {
    double total = 0;
    const int n = cfg["eval_batches"];
    for (int i = 0; i < n; ++i) {
      val_batches.get(std::uint64_t(i));
      model.set_input("ids", val_batches.x(), {batch, context});
      model.set_input("targets", val_batches.y(), {batch, context});
      model.forward(Mode::infer);
      total += model.loss();
    }
    return total / n;
  };
  if (a.command == "eval") {
    std::printf("validation loss %.4f nats/char (%d batches of %lld x %lld)\n", validation_loss(), cfg["eval_batches"].get<int>(),
                (long long)batch, (long long)context);
    return 0;
  }

  fs::create_directories(dir);
  tok.save(tok_file);
  const std::int64_t steps = cfg["steps"], eval_every = cfg["eval_every"];
  const auto schedule = optim::warmup_cosine(cfg["lr"], cfg["min_lr"], cfg["warmup"], steps);
  std::ofstream jsonl(dir / "metrics.jsonl", a.resume ? std::ios::app : std::ios::trunc);
  std::ofstream csv(dir / "metrics.csv", a.resume ? std::ios::app : std::ios::trunc);
  if (!a.resume) csv << "step,loss,lr,tokens_per_s,val_loss\n";
  auto save = [&] {
    checkpoint::save_training<float>(ckpt, model, &opt, {{"config", cfg.dump()}, {"model", "charlm"}, {"tokenizer", "tokenizer.json"}});
  };
  std::signal(SIGINT, on_sigint);
  const bool tty = ::isatty(STDOUT_FILENO);
  std::size_t n_params = 0;
  for (const auto& p : model.parameters()) n_params += std::size_t(p.value.numel);
  std::printf("ctgrad train charlm: size %s, %zu parameters, %d threads; KJV: %zu train / %zu validation chars, vocab %d\n",
              cfg["size"].get<std::string>().c_str(), n_params, model.threads(), train_ids.size(), val_ids.size(), tok.vocab_size());
  const std::int64_t first = opt.steps() + 1;
  if (first > 1) std::printf("resuming at step %lld from %s\n", (long long)first, ckpt.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  double avg = -1;
  for (std::int64_t step = first; step <= steps; ++step) {
    train_batches.get(std::uint64_t(step));
    model.set_input("ids", train_batches.x(), {batch, context});
    model.set_input("targets", train_batches.y(), {batch, context});
    model.zero_grad();
    model.forward();
    model.backward();
    optim::clip_grad_norm(model.parameters(), cfg["clip"]);
    opt.set_lr(schedule(step));
    opt.step();
    const double loss = model.loss();
    avg = avg < 0 ? loss : 0.9 * avg + 0.1 * loss;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tps = double((step - first + 1) * batch * context) / secs;
    double val = -1;
    if (step % eval_every == 0 || step == steps) val = validation_loss();
    jsonl << json{{"step", step}, {"loss", loss}, {"lr", opt.lr()}, {"tokens_per_s", tps}}.dump() << "\n";
    if (val >= 0) jsonl << json{{"step", step}, {"val_loss", val}}.dump() << "\n";
    csv << step << ',' << loss << ',' << opt.lr() << ',' << tps << ',' << (val >= 0 ? std::to_string(val) : "") << "\n";
    csv.flush();  // a run can be watched (and killed) at any step
    jsonl.flush();
    const double eta = secs / double(step - first + 1) * double(steps - step);
    char line[200];
    const int width = 24, filled = int(width * step / steps);
    std::snprintf(line, sizeof line, "[%s%s] step %lld/%lld  loss %.3f  %.0f tok/s  ETA %s", std::string(std::size_t(filled), '#').c_str(),
                  std::string(std::size_t(width - filled), '.').c_str(), (long long)step, (long long)steps, avg, tps, fmt_time(eta).c_str());
    if (tty) std::printf("\r%s", line), std::fflush(stdout);
    if (val >= 0) {
      std::printf("%s%s  validation %.4f\n", tty ? "\n" : "", tty ? "" : line, val);
      save();
    }
    if (g_interrupted) {
      save();
      std::printf("\ninterrupted at step %lld: checkpoint saved to %s (continue with --resume)\n", (long long)step, ckpt.c_str());
      return 130;
    }
  }
  jsonl.close();
  csv.close();
  plot(dir / "metrics.csv", dir / "loss.png");
  std::printf("done: checkpoint %s, metrics %s, plot %s\n", ckpt.c_str(), (dir / "metrics.jsonl").c_str(), (dir / "loss.png").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    json cfg = default_config();
    if (!a.config_file.empty()) {
      std::ifstream in(a.config_file);
      if (!in) throw usage_error("cannot open config file " + a.config_file);
      json file;
      try {
        in >> file;
      } catch (const std::exception& e) {
        throw usage_error("config file " + a.config_file + " is not valid JSON: " + e.what());
      }
      for (auto it = file.begin(); it != file.end(); ++it) set_key(cfg, it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump()));
    }
    for (const auto& s : a.sets) set_key(cfg, s);
    const std::string size = cfg["size"];
    if (size == "tiny") return run_charlm<models::kCharLmTiny>(a, cfg);
    if (size == "small") return run_charlm<models::kCharLmSmall>(a, cfg);
    throw usage_error("unknown size '" + size + "' (sizes: tiny, small)");
  } catch (const usage_error& e) {
    std::fprintf(stderr, "ctgrad: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
