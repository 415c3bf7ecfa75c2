// The ctgrad command:
//   ctgrad train <model> [--config file.json] [--set key=value ...] [--run DIR] [--resume] [--threads N]
//   ctgrad eval <model> [--run DIR] [--threads N]
//   ctgrad sample <model> [--run DIR] [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P]
//                         [--seed S] [--end TEXT] [--slide]
// Models: gpt (GPT-2-style decoder-only LM on the KJV Bible, characters or SentencePiece BPE).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/graph/random.hpp>
#include <ctgrad/models/gpt.hpp>
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

// The default run is nanoGPT's "baby GPT" CPU recipe on the KJV text (docs/models/gpt.md).
json default_config() {
  return {{"size", "small"},  {"tokenizer", "char"}, {"steps", 2000},   {"batch", 12},        {"context", 64},
          {"lr", 1e-3},       {"min_lr", 1e-4},      {"warmup", 100},   {"beta2", 0.99},      {"weight_decay", 0.1},
          {"clip", 1.0},      {"seed", 1},           {"eval_every", 500}, {"eval_windows", 0}, {"sample_tokens", 300}};
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
      if (used != value.size() || !std::isfinite(cfg[key].get<double>())) throw std::invalid_argument(value);
    }
  } catch (const std::logic_error&) {
    throw usage_error("config key '" + key + "' expects a " + std::string(cfg[key].type_name()) + ", got '" + value + "'");
  }
}

struct Args {
  std::string command, model, run_dir, prompt = "And God said", config_file, end;
  std::vector<std::string> sets;
  bool resume = false, slide = false;
  int threads = 0, tokens = 200, top_k = 0;
  double temperature = 0.8, top_p = 1.0;
  std::uint64_t seed = 1;
};

Args parse(int argc, char** argv) {
  if (argc < 3) throw usage_error("usage: ctgrad train|eval|sample <model> [options] (models: gpt)");
  Args a;
  a.command = argv[1], a.model = argv[2];
  if (a.command != "train" && a.command != "eval" && a.command != "sample") throw usage_error("unknown command '" + a.command + "'");
  if (a.model != "gpt") throw usage_error("unknown model '" + a.model + "' (models: gpt)");
  a.run_dir = "runs/" + a.model;
  for (int i = 3; i < argc; ++i) {
    const std::string o = argv[i];
    try {
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
    else if (o == "--top-p") a.top_p = std::stod(value());
    else if (o == "--end") a.end = value();
    else if (o == "--slide") a.slide = true;
    else if (o == "--seed") a.seed = std::stoull(value());
    else throw usage_error("unknown option '" + o + "'");
    } catch (const std::logic_error&) {  // std::stoi and friends
      throw usage_error("option " + o + " expects a number, got '" + argv[i] + "'");
    }
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
                          "'; set datafile separator ','; set key autotitle columnhead; set xlabel 'step'; set ylabel 'loss (nats/token)';"
                          " plot '" + csv.string() + "' using 1:2 with lines title 'train', '' using 1:5 with linespoints title 'validation'\" 2>&1";
  if (std::system(cmd.c_str()) != 0) std::cerr << "ctgrad: warning: gnuplot failed to draw " << png << "\n";
}

// One tokenizer of either kind, chosen by the config, saved beside the checkpoint.
struct AnyTokenizer {
  std::unique_ptr<data::Tokenizer> tok;
  std::string file;  // in the run folder
  static AnyTokenizer train(const std::string& kind, const std::string& text, const fs::path& dir, int vocab, std::uint64_t seed) {
    AnyTokenizer t;
    if (kind == "char") {
      t.tok = std::make_unique<data::CharTokenizer>(data::CharTokenizer::train(text));
      t.file = "tokenizer.json";
      t.tok->save(dir / t.file);
    } else {
      // SentencePiece writes <prefix>.model itself.
      t.tok = std::make_unique<data::SentencePieceTokenizer>(
          data::SentencePieceTokenizer::train(text, dir / "tokenizer", {.vocab_size = vocab, .model_type = "bpe", .seed = seed}));
      t.file = "tokenizer.model";
    }
    return t;
  }
  static AnyTokenizer load(const std::string& kind, const fs::path& dir) {
    AnyTokenizer t;
    t.file = kind == "char" ? "tokenizer.json" : "tokenizer.model";
    if (!fs::exists(dir / t.file)) throw usage_error("the tokenizer " + (dir / t.file).string() + " is missing");
    if (kind == "char") t.tok = std::make_unique<data::CharTokenizer>(data::CharTokenizer::load(dir / t.file));
    else t.tok = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::load(dir / t.file));
    return t;
  }
};

std::string size_list() { return "tiny, small, medium"; }

// Prints generated text as it comes: decodes the whole sequence and prints what is new, since a
// BPE piece's leading space (and a UTF-8 character split over byte tokens) depends on its left.
struct TextStream {
  const data::Tokenizer& tok;
  std::vector<std::int32_t> ids;
  std::size_t printed;
  TextStream(const data::Tokenizer& t, std::vector<std::int32_t> prompt) : tok(t), ids(std::move(prompt)), printed(tok.decode(ids).size()) {}
  void operator()(std::int32_t id) {
    ids.push_back(id);
    const std::string text = tok.decode(ids);
    if (text.size() > printed) std::cout << text.substr(printed) << std::flush;
    printed = std::max(printed, text.size());
  }
};

template <models::GptConfig P>
struct Gpt {
  static constexpr auto G = freeze<models::gpt<P>>();
};

int run_gpt_of_size(const Args& a, json cfg);

template <models::GptConfig P>
int run_gpt(const Args& a, json cfg) {
  static constexpr const auto& G = Gpt<P>::G;
  const fs::path dir = a.run_dir, ckpt = dir / "checkpoint.safetensors";
  const std::string size = cfg["size"], tok_kind = cfg["tokenizer"];
  if (tok_kind != "char" && tok_kind != "bpe") throw usage_error("unknown tokenizer '" + tok_kind + "' (tokenizers: char, bpe)");

  if (a.command == "sample" || a.command == "eval" || a.resume) {
    if (!fs::exists(ckpt)) throw usage_error("no checkpoint in " + dir.string() + " (train first)");
    const checkpoint::File peek(ckpt);  // which model and config, before loading any tensor
    const auto& meta = peek.metadata();
    if (!meta.count("model") || !meta.count("config"))
      throw usage_error(ckpt.string() + " was not written by `ctgrad train` (no model or config in its metadata)");
    if (meta.at("model") != "gpt") throw usage_error(ckpt.string() + " is a checkpoint of model '" + meta.at("model") + "', not gpt");
    const json saved = json::parse(meta.at("config"));
    if (a.command == "train") {
      for (const char* k : {"size", "tokenizer", "context"})
        if (saved[k] != cfg[k])
          throw usage_error("the checkpoint in " + dir.string() + " has " + k + " " + saved[k].dump() + ", not " + cfg[k].dump() +
                            " (resume with the same config)");
    } else if (saved["size"] != cfg["size"] || saved != cfg) {
      // eval and sample follow the checkpoint's config, except for what the user --set
      json c = saved;
      for (const auto& s : a.sets) set_key(c, s);
      if (c["size"] != saved["size"] || c["tokenizer"] != saved["tokenizer"] || c["context"] > saved["context"])
        throw usage_error("the checkpoint in " + dir.string() + " is a gpt of size " + saved["size"].get<std::string>() + ", tokenizer " +
                          saved["tokenizer"].get<std::string>() + ", context " + saved["context"].dump() + ": it cannot run as " +
                          c["size"].get<std::string>() + "/" + c["tokenizer"].get<std::string>() + "/" + c["context"].dump());
      if (c != cfg) return run_gpt_of_size(a, c);
    }
  }
  const std::int64_t context = cfg["context"], batch = cfg["batch"];
  if (context < 2 || context > P.context)
    throw usage_error("context " + std::to_string(context) + " is outside [2, " + std::to_string(P.context) + "] for size " + size);

  Program<G> model(Options().threads(a.threads).seed(cfg["seed"].get<std::uint64_t>()));
  optim::AdamW<float> opt(model.parameters(),
                          optim::AdamOptions().lr(cfg["lr"]).betas(0.9, cfg["beta2"]).weight_decay(cfg["weight_decay"]),
                          {optim::no_decay_group()});
  const bool from_checkpoint = a.command != "train" || a.resume;
  if (from_checkpoint) checkpoint::load_training<float>(ckpt, model, &opt);

  const data::TextSplit split = data::split_text(data::kjv_text());
  if (!from_checkpoint) fs::create_directories(dir);
  AnyTokenizer tok = from_checkpoint ? AnyTokenizer::load(tok_kind, dir)
                                     : AnyTokenizer::train(tok_kind, split.train, dir, P.vocab, cfg["seed"].get<std::uint64_t>());
  const std::int32_t vocab = tok.tok->vocab_size();
  if (vocab > P.vocab)
    throw usage_error("the tokenizer has " + std::to_string(vocab) + " tokens, more than size " + size + "'s vocabulary of " +
                      std::to_string(P.vocab));

  if (a.command == "sample") {
    models::SamplingOptions so = models::SamplingOptions().temperature(a.temperature).top_k(a.top_k).top_p(a.top_p).seed(a.seed)
                                     .max_tokens(a.tokens).slide(a.slide).context(int(context));
    try {
      models::check(so);
    } catch (const std::invalid_argument& e) {
      throw usage_error(e.what());
    }
    if (!a.end.empty()) {
      const auto e = tok.tok->encode(a.end);
      if (e.size() != 1) throw usage_error("--end '" + a.end + "' is " + std::to_string(e.size()) + " tokens, not one");
      so.end_token(e[0]);
    }
    std::vector<std::int32_t> ids = tok.tok->encode(a.prompt);
    if (ids.empty()) throw usage_error("the prompt is empty");
    if (std::int64_t(ids.size()) > context)
      throw usage_error("the prompt is " + std::to_string(ids.size()) + " tokens, longer than the context of " + std::to_string(context) +
                        " the model was trained with");
    models::GptGenerator<P> gen(model.parameters(), Options().threads(a.threads));
    std::cout << a.prompt << std::flush;
    const std::size_t prompt_tokens = ids.size();
    TextStream out(*tok.tok, ids);
    gen.generate(ids, vocab, so, std::ref(out));
    std::cout << "\n";
    if (std::int64_t(ids.size()) > context && !a.slide && int(ids.size() - prompt_tokens) < a.tokens)
      std::cerr << "ctgrad: stopped at the context limit of " << context << " tokens (--slide goes on)\n";
    return 0;
  }

  const std::vector<std::int32_t> train_ids = tok.tok->encode(split.train), val_ids = tok.tok->encode(split.validation);
  data::LmBatches train_batches(train_ids, context, batch, cfg["seed"].get<std::uint64_t>());
  // Validation: the split cut into consecutive windows of `context` tokens (all of them, or the
  // first eval_windows), every position scored once. Same definition as bench/reference/train_gpt.py.
  const std::int64_t all_windows = std::int64_t(val_ids.size() - 1) / context;
  const std::int64_t windows = cfg["eval_windows"].get<std::int64_t>() > 0 ? std::min(cfg["eval_windows"].get<std::int64_t>(), all_windows) : all_windows;
  std::vector<std::int32_t> vx(std::size_t(batch * context)), vy(vx.size());
  auto validation_loss = [&]() {
    double total = 0;
    for (std::int64_t w0 = 0; w0 < windows; w0 += batch) {
      const std::int64_t n = std::min(batch, windows - w0);
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t t = 0; t < context; ++t) {
          vx[std::size_t(b * context + t)] = val_ids[std::size_t((w0 + b) * context + t)];
          vy[std::size_t(b * context + t)] = val_ids[std::size_t((w0 + b) * context + t + 1)];
        }
      model.set_input("ids", std::span<const std::int32_t>(vx).first(std::size_t(n * context)), {n, context});
      model.set_input("targets", std::span<const std::int32_t>(vy).first(std::size_t(n * context)), {n, context});
      model.forward(Mode::infer);
      total += double(model.loss()) * double(n);
    }
    return total / double(windows);
  };
  const char* unit = tok_kind == "char" ? "nats/char" : "nats/token";
  if (a.command == "eval") {
    const auto t0 = std::chrono::steady_clock::now();
    const double v = validation_loss();
    std::printf("validation loss %.4f %s (%lld windows of %lld tokens, %.1f s)\n", v, unit, (long long)windows, (long long)context,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }

  const std::int64_t steps = cfg["steps"], eval_every = cfg["eval_every"];
  if (steps < 1 || eval_every < 1) throw usage_error("steps and eval_every must be >= 1");
  const auto schedule = optim::warmup_cosine(cfg["lr"], cfg["min_lr"], cfg["warmup"], steps);
  std::ofstream jsonl(dir / "metrics.jsonl", a.resume ? std::ios::app : std::ios::trunc);
  std::ofstream csv(dir / "metrics.csv", a.resume ? std::ios::app : std::ios::trunc);
  if (!a.resume) csv << "step,loss,lr,tokens_per_s,val_loss\n";
  auto save = [&] {
    checkpoint::save_training<float>(ckpt, model, &opt, {{"config", cfg.dump()}, {"model", "gpt"}, {"tokenizer", tok.file}});
  };
  std::signal(SIGINT, on_sigint);
  const bool tty = ::isatty(STDOUT_FILENO);
  std::size_t n_params = 0;
  for (const auto& p : model.parameters()) n_params += std::size_t(p.value.numel);
  std::printf("ctgrad train gpt: size %s (%d layers, %d heads, d_model %d), %zu parameters, %d threads\n", size.c_str(), P.n_layer,
              P.n_head, P.d_model, n_params, model.threads());
  std::printf("KJV Bible: %zu train / %zu validation tokens, %s tokenizer with %d tokens; batch %lld x context %lld, %lld steps\n",
              train_ids.size(), val_ids.size(), tok_kind.c_str(), vocab, (long long)batch, (long long)context, (long long)steps);
  const std::int64_t first = opt.steps() + 1;
  if (first > steps) {
    std::printf("the checkpoint in %s is already at step %lld of %lld: nothing to train (raise --set steps=)\n", dir.c_str(),
                (long long)opt.steps(), (long long)steps);
    return 0;
  }
  if (first > 1) std::printf("resuming at step %lld from %s\n", (long long)first, ckpt.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  double avg = -1, eval_secs = 0, last_val = -1;
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
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - eval_secs;
    const double tps = double((step - first + 1) * batch * context) / secs;
    double val = -1;
    if (step % eval_every == 0 || step == steps) {
      const auto e0 = std::chrono::steady_clock::now();
      last_val = val = validation_loss();
      eval_secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
    }
    jsonl << json{{"step", step}, {"loss", loss}, {"lr", opt.lr()}, {"tokens_per_s", tps}}.dump() << "\n";
    if (val >= 0) jsonl << json{{"step", step}, {"val_loss", val}, {"train_seconds", secs}}.dump() << "\n";
    csv << step << ',' << loss << ',' << opt.lr() << ',' << tps << ',' << (val >= 0 ? std::to_string(val) : "") << "\n";
    csv.flush();  // a run can be watched (and killed) at any step
    jsonl.flush();
    const double eta = secs / double(step - first + 1) * double(steps - step);
    char line[200];
    const int width = 24, filled = int(width * step / steps);
    std::snprintf(line, sizeof line, "[%s%s] step %lld/%lld  loss %.3f  %.0f tok/s  ETA %s", std::string(std::size_t(filled), '#').c_str(),
                  std::string(std::size_t(width - filled), '.').c_str(), (long long)step, (long long)steps, avg, tps, fmt_time(eta).c_str());
    if (tty) std::printf("\r%s", line), std::fflush(stdout);
    else if (step % 100 == 0 && val < 0) std::printf("%s\n", line);
    if (val >= 0) {
      std::printf("%s%s  validation %.4f %s\n", tty ? "\n" : "", tty ? "" : line, val, unit);
      std::fflush(stdout);
      const auto s0 = std::chrono::steady_clock::now();
      save();
      eval_secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();  // not training time
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
  const double train_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("done in %s: validation loss %.4f %s; checkpoint %s, metrics %s, plot %s\n", fmt_time(train_secs).c_str(), last_val, unit,
              ckpt.c_str(), (dir / "metrics.jsonl").c_str(), (dir / "loss.png").c_str());
  const int n_sample = cfg["sample_tokens"];
  if (n_sample > 0) {
    // The model writes on from a prompt (key/value cache; past the context it re-reads its last half).
    std::vector<std::int32_t> ids = tok.tok->encode(a.prompt);
    models::GptGenerator<P> gen(model.parameters(), Options().threads(a.threads));
    std::printf("sample (temperature %.1f, seed %llu):\n%s", a.temperature, (unsigned long long)a.seed, a.prompt.c_str());
    std::fflush(stdout);
    TextStream out(*tok.tok, ids);
    gen.generate(ids, vocab, models::SamplingOptions().temperature(a.temperature).seed(a.seed).max_tokens(n_sample).slide(true).context(int(context)),
                 std::ref(out));
    std::cout << "\n";
  }
  return 0;
}

int run_gpt_of_size(const Args& a, json cfg) {
  const std::string size = cfg["size"];
  if (size == "tiny") return run_gpt<models::kGptTiny>(a, cfg);
  if (size == "small") return run_gpt<models::kGptSmall>(a, cfg);
  if (size == "medium") return run_gpt<models::kGptMedium>(a, cfg);
  throw usage_error("unknown size '" + size + "' (sizes: " + size_list() + ")");
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
      // Before the --set values, which win; eval and sample apply both over the checkpoint's config.
      std::vector<std::string> from_file;
      for (auto it = file.begin(); it != file.end(); ++it) from_file.push_back(it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump()));
      a.sets.insert(a.sets.begin(), from_file.begin(), from_file.end());
    }
    for (const auto& s : a.sets) set_key(cfg, s);
    return run_gpt_of_size(a, cfg);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "ctgrad: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
