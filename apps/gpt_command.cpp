// ctgrad train|eval|sample gpt: the GPT on the KJV Bible (docs/models/gpt.md).
#include <functional>
#include <memory>

#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/models/gpt.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>

#include "cli.hpp"

namespace ctgrad::cli {
namespace {

// The default run is nanoGPT's "baby GPT" CPU recipe on the KJV text (docs/models/gpt.md).
json default_config() {
  return {{"size", "small"},  {"tokenizer", "char"}, {"steps", 2000},   {"batch", 12},        {"context", 64},
          {"lr", 1e-3},       {"min_lr", 1e-4},      {"warmup", 100},   {"beta2", 0.99},      {"weight_decay", 0.1},
          {"clip", 1.0},      {"seed", 1},           {"eval_every", 500}, {"eval_windows", 0}, {"sample_tokens", 300}};
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

int run_gpt_of_size(const Args& a, const json& cfg);

template <models::GptConfig P>
int run_gpt(const Args& a, json cfg) {
  static constexpr const auto& G = Gpt<P>::G;
  const fs::path dir = a.run_dir, ckpt = dir / "checkpoint.safetensors";
  const std::string size = cfg["size"], tok_kind = cfg["tokenizer"];
  if (tok_kind != "char" && tok_kind != "bpe") throw usage_error("unknown tokenizer '" + tok_kind + "' (tokenizers: char, bpe)");

  if (a.command == "sample" || a.command == "eval" || a.resume) {
    const json saved = checkpoint_config(ckpt, "gpt");
    if (a.command == "train") {
      require_same(saved, cfg, {"size", "tokenizer", "context"}, dir);
    } else if (saved["size"] != cfg["size"] || saved != cfg) {
      // eval and sample follow the checkpoint's config, except for what the user --set
      const json c = apply_sets(saved, a);
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
  auto save = [&] {
    checkpoint::save_training<float>(ckpt, model, &opt, {{"config", cfg.dump()}, {"model", "gpt"}, {"tokenizer", tok.file}});
  };
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
  TrainingLog log(dir, a.resume, first, steps, unit);
  double last_val = -1;
  for (std::int64_t step = first; step <= steps; ++step) {
    train_batches.get(std::uint64_t(step));
    model.set_input("ids", train_batches.x(), {batch, context});
    model.set_input("targets", train_batches.y(), {batch, context});
    model.zero_grad();
    model.forward();
    model.backward();
    opt.set_lr(schedule(step));
    model.execute([&] {  // on the model's --threads
      optim::clip_grad_norm(model.parameters(), cfg["clip"]);
      opt.step();
    });
    const double loss = model.loss();  // before validation runs the model on other batches
    std::optional<double> val;
    if (step % eval_every == 0 || step == steps) last_val = *(val = log.untimed(validation_loss));
    log.step(step, loss, opt.lr(), double(batch * context), val);
    if (val) log.untimed([&] { return save(), 0; });
    if (stop_on_interrupt(step, save, ckpt)) return 130;
  }
  log.close();
  plot(dir / "metrics.csv", dir / "loss.png", unit);
  std::printf("done after %s of training: validation loss %.4f %s; checkpoint %s, metrics %s, plot %s\n", fmt_time(log.seconds()).c_str(), last_val, unit,
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

int run_gpt_of_size(const Args& a, const json& cfg) {
  const std::string size = cfg["size"];
  if (size == "tiny") return run_gpt<models::kGptTiny>(a, cfg);
  if (size == "small") return run_gpt<models::kGptSmall>(a, cfg);
  if (size == "medium") return run_gpt<models::kGptMedium>(a, cfg);
  throw usage_error("unknown size '" + size + "' (sizes: " + size_list() + ")");
}

}  // namespace

int gpt_command(const Args& a) {
  if (a.command != "train" && a.command != "eval" && a.command != "sample")
    throw usage_error("gpt has no command '" + a.command + "' (train, eval, sample)");
  return run_gpt_of_size(a, apply_sets(default_config(), a));
}

}  // namespace ctgrad::cli
