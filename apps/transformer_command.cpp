// ctgrad train|eval transformer: the encoder-decoder Transformer on the copy task or on EN->DE
// translation of the Ding dictionary's sentence pairs (docs/models/transformer.md).
#include <algorithm>
#include <memory>

#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/data/pairs.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/graph/random.hpp>
#include <ctgrad/metrics/bleu.hpp>
#include <ctgrad/models/transformer.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>

#include "cli.hpp"

namespace ctgrad::cli {
namespace {

// The paper's recipe: Adam (0.9, 0.98, 1e-9), Noam schedule; label smoothing 0.1 and dropout 0.1
// are in the model presets. Warm-up 4000 for base; shorter for the small runs on 2 cores, with the
// rate halved: at factor 1 and warm-up 800 (peak 2.2e-3) the small model's attention collapsed
// onto single keys and it learned to ignore the source (docs/models/transformer.md).
json default_config() {
  return {{"task", "translate"}, {"size", "small"}, {"steps", 3000},  {"batch", 64},   {"max_len", 64},
          {"lr_factor", 0.5},    {"warmup", 1000},  {"seed", 1},      {"eval_every", 500}, {"beam", 4},
          {"alpha", 0.6},        {"eval_sentences", 0}};
}

constexpr std::int32_t kPad = 0, kBos = 2, kEos = 3;  // the shared SentencePiece vocabulary's ids (unk 1)

struct Example {
  std::vector<std::int32_t> src, tgt;  // src ends with eos; tgt = bos ... eos
  std::string src_text, tgt_text;
};

struct Batch {
  std::vector<std::int32_t> src, src_len, tgt_in, tgt_len, tgt_out;
  std::int64_t B = 0, S = 0, T = 0;
  std::int64_t tokens() const {
    std::int64_t n = 0;
    for (auto l : tgt_len) n += l;
    return n;
  }
};

Batch make_batch(const std::vector<Example>& ex, std::span<const std::int64_t> idx) {
  std::vector<std::vector<std::int32_t>> s, ti, to;
  for (auto i : idx) {
    const auto& e = ex[std::size_t(i)];
    s.push_back(e.src);
    ti.emplace_back(e.tgt.begin(), e.tgt.end() - 1);
    to.emplace_back(e.tgt.begin() + 1, e.tgt.end());
  }
  const auto ps = data::pad(s, kPad, 1 << 20), pi = data::pad(ti, kPad, 1 << 20), po = data::pad(to, kPad, 1 << 20);
  return {ps.ids, ps.lengths, pi.ids, pi.lengths, po.ids, ps.batch, ps.length, pi.length};
}

template <class P>
void feed(P& model, const Batch& b) {
  model.set_input("src", std::span<const std::int32_t>(b.src), {b.B, b.S});
  model.set_input("src_len", std::span<const std::int32_t>(b.src_len), {b.B});
  model.set_input("tgt_in", std::span<const std::int32_t>(b.tgt_in), {b.B, b.T});
  model.set_input("tgt_len", std::span<const std::int32_t>(b.tgt_len), {b.B});
  model.set_input("tgt_out", std::span<const std::int32_t>(b.tgt_out), {b.B, b.T});
}

// Batches of an epoch: shuffled, then sorted by length within pools of 50 batches (less padding),
// batch order shuffled again. A function of (seed, epoch): a resumed run sees the same batches.
std::vector<std::vector<std::int64_t>> epoch_batches(const std::vector<Example>& ex, std::int64_t batch, std::uint64_t seed,
                                                     std::uint64_t epoch) {
  const auto perm = data::shuffled(std::int64_t(ex.size()), seed, epoch);
  std::vector<std::vector<std::int64_t>> out;
  const std::int64_t pool = 50 * batch;
  for (std::int64_t p0 = 0; p0 < std::int64_t(perm.size()); p0 += pool) {
    std::vector<std::int64_t> chunk(perm.begin() + p0, perm.begin() + std::min<std::int64_t>(p0 + pool, std::int64_t(perm.size())));
    std::stable_sort(chunk.begin(), chunk.end(), [&](auto x, auto y) { return ex[std::size_t(x)].src.size() < ex[std::size_t(y)].src.size(); });
    for (std::size_t b = 0; b < chunk.size(); b += std::size_t(batch))
      out.emplace_back(chunk.begin() + std::ptrdiff_t(b), chunk.begin() + std::ptrdiff_t(std::min(chunk.size(), b + std::size_t(batch))));
  }
  const auto order = data::shuffled(std::int64_t(out.size()), seed ^ 0x9e3779b97f4a7c15ull, epoch);
  std::vector<std::vector<std::int64_t>> shuffled_out;
  for (auto i : order) shuffled_out.push_back(std::move(out[std::size_t(i)]));
  return shuffled_out;
}

// The copy task: 1, then 9 symbols of 1..10; copy example n.
Example copy_example(std::uint64_t seed, std::uint64_t n) {
  Example e;
  e.src.push_back(1);
  for (int i = 1; i < 10; ++i) e.src.push_back(std::int32_t(1 + random::bits(random::key(seed, n, 17), std::uint64_t(i)) % 10));
  e.tgt = e.src;  // tgt_in = 1 x1..x8, tgt_out = x1..x9
  return e;
}

struct TranslationData {
  std::unique_ptr<data::SentencePieceTokenizer> tok;
  std::vector<Example> train, validation, test;
};

TranslationData translation_data(const fs::path& dir, bool train_tokenizer, int vocab, std::int64_t max_len, std::uint64_t seed) {
  const data::PairSplit split = data::split_pairs(data::ding_sentence_pairs());
  TranslationData d;
  const fs::path model_file = dir / "tokenizer.model";
  if (train_tokenizer) {
    std::string text;  // one shared vocabulary for both languages, from the training split only
    for (const auto& p : split.train) text += p.en + "\n" + p.de + "\n";
    d.tok = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::train(
        text, dir / "tokenizer", {.vocab_size = vocab, .model_type = "bpe", .seed = seed, .unk_id = 1, .bos_id = kBos, .eos_id = kEos, .pad_id = kPad}));
  } else {
    if (!fs::exists(model_file)) throw usage_error("the tokenizer " + model_file.string() + " is missing");
    d.tok = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::load(model_file));
  }
  if (d.tok->vocab_size() != vocab || d.tok->pad_id() != kPad || d.tok->bos_id() != kBos || d.tok->eos_id() != kEos)
    throw usage_error("the tokenizer " + model_file.string() + " does not match the model (vocabulary " + std::to_string(d.tok->vocab_size()) + ")");
  auto encode = [&](const std::vector<data::SentencePair>& pairs, bool drop_long) {
    std::vector<Example> out;
    for (const auto& p : pairs) {
      Example e;
      e.src = d.tok->encode(p.en);
      e.tgt = d.tok->encode(p.de);
      if (drop_long && (std::int64_t(e.src.size()) >= max_len || std::int64_t(e.tgt.size()) >= max_len)) continue;
      if (std::int64_t(e.src.size()) >= max_len) e.src.resize(std::size_t(max_len - 1));
      e.src.push_back(kEos);
      e.tgt.insert(e.tgt.begin(), kBos);
      e.tgt.push_back(kEos);
      e.src_text = p.en, e.tgt_text = p.de;
      out.push_back(std::move(e));
    }
    return out;
  };
  d.train = encode(split.train, true);
  d.validation = encode(split.validation, true);
  d.test = encode(split.test, false);  // every test sentence counts for BLEU
  return d;
}

std::string gnuplot_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// One PNG per attention kind and layer, the heads side by side, tokens on the axes (as d2l shows them).
template <class P>
void write_heatmaps(const P& prog, const fs::path& out, int layers, int heads, const std::vector<std::string>& src_tokens,
                    const std::vector<std::string>& tgt_tokens) {
  if (!fs::exists("/usr/bin/gnuplot")) throw usage_error("--attention-png needs gnuplot (apt-get install gnuplot-nox)");
  fs::create_directories(out);
  struct Kind {
    const char* name;
    const char* title;
    const std::vector<std::string>& rows;
    const std::vector<std::string>& cols;
  };
  const Kind kinds[] = {{"enc", "encoder self-attention", src_tokens, src_tokens},
                        {"dec", "decoder self-attention", tgt_tokens, tgt_tokens},
                        {"cross", "encoder-decoder attention", tgt_tokens, src_tokens}};
  auto tics = [](const std::vector<std::string>& t) {
    std::string s = "(";
    for (std::size_t i = 0; i < t.size(); ++i) s += (i ? ", " : "") + gnuplot_quote(t[i]) + " " + std::to_string(i);
    return s + ")";
  };
  for (const Kind& k : kinds)
    for (int l = 0; l < layers; ++l) {
      const auto w = prog.output(std::string("weights.") + k.name + "." + std::to_string(l));  // [1, heads, rows, cols]
      const std::int64_t R = w.size(2), Cn = w.size(3);
      const fs::path data = out / (std::string(k.name) + "_" + std::to_string(l) + ".dat"), png = out / (std::string(k.name) + "_layer" + std::to_string(l) + ".png");
      {
        std::ofstream f(data);
        for (int h = 0; h < heads; ++h) {
          for (std::int64_t r = 0; r < R; ++r) {
            for (std::int64_t c = 0; c < Cn; ++c) f << w.data[(h * R + r) * Cn + c] << (c + 1 < Cn ? " " : "\n");
          }
          f << "\n\n";
        }
      }
      std::ofstream script(out / "plot.gp");
      script << "set terminal pngcairo noenhanced size " << 360 * heads << ",420 font ',8'\nset output " << gnuplot_quote(png.string()) << "\n"
             << "set multiplot layout 1," << heads << " title " << gnuplot_quote(std::string(k.title) + ", layer " + std::to_string(l)) << "\n"
             << "set palette grey negative\nset cbrange [0:1]\nunset colorbox\nset yrange [" << R << "-0.5:-0.5]\nset xrange [-0.5:" << Cn << "-0.5]\n"
             << "set xtics rotate by 90 right " << tics(k.cols) << "\nset ytics " << tics(k.rows) << "\nset size ratio -1\n";
      for (int h = 0; h < heads; ++h)
        script << "set title 'head " << h << "'\nplot " << gnuplot_quote(data.string()) << " index " << h << " matrix with image pixels notitle\n";
      script << "unset multiplot\n";
      script.close();
      if (std::system(("/usr/bin/gnuplot " + (out / "plot.gp").string() + " 2>&1").c_str()) != 0)
        throw std::runtime_error("gnuplot failed to draw " + png.string());
      fs::remove(data);
      std::printf("wrote %s\n", png.c_str());
    }
  fs::remove(out / "plot.gp");
}

template <models::TransformerConfig P>
struct Graphs {
  static constexpr auto train = freeze<models::transformer<P>>();
};
template <models::TransformerConfig P>
struct MapGraph {
  static constexpr auto graph = freeze<models::transformer_attention_maps<P>>();
};

template <models::TransformerConfig P>
int run(const Args& a, const json& cfg) {
  static constexpr const auto& G = Graphs<P>::train;
  const fs::path dir = a.run_dir, ckpt = dir / "checkpoint.safetensors";
  const std::string task = cfg["task"];
  const std::int64_t batch = cfg["batch"], max_len = cfg["max_len"], steps = cfg["steps"], eval_every = cfg["eval_every"];
  const std::uint64_t seed = cfg["seed"];
  if (batch < 1 || max_len < 4 || steps < 1 || eval_every < 1) throw usage_error("batch, steps, eval_every must be >= 1 and max_len >= 4");
  if (cfg["beam"].get<std::int64_t>() < 1 || !(cfg["alpha"].get<double>() >= 0)) throw usage_error("beam must be >= 1 and alpha >= 0");
  Program<G> model(Options().threads(a.threads).seed(seed));
  optim::Adam<float> opt(model.parameters(), optim::AdamOptions().betas(0.9, 0.98).eps(1e-9));
  const bool from_checkpoint = a.command != "train" || a.resume;
  if (from_checkpoint) checkpoint::load_training<float>(ckpt, model, &opt);
  else fs::create_directories(dir);

  TranslationData tr;
  if (task == "translate") tr = translation_data(dir, !from_checkpoint, P.vocab, max_len, seed);
  const std::vector<Example>& train = tr.train;
  std::vector<Example> copy_val;
  if (task == "copy")
    for (std::uint64_t n = 0; n < 256; ++n) copy_val.push_back(copy_example(seed + 1000, n));  // never trained on
  const std::vector<Example>& val = task == "copy" ? copy_val : tr.validation;

  auto validation_loss = [&] {
    double total = 0, n = 0;
    std::vector<std::int64_t> idx;
    for (std::int64_t i = 0; i < std::int64_t(val.size()); ++i) idx.push_back(i);
    std::stable_sort(idx.begin(), idx.end(), [&](auto x, auto y) { return val[std::size_t(x)].src.size() < val[std::size_t(y)].src.size(); });
    for (std::size_t b = 0; b < idx.size(); b += std::size_t(batch)) {
      const Batch bt = make_batch(val, std::span<const std::int64_t>(idx).subspan(b, std::min(idx.size() - b, std::size_t(batch))));
      feed(model, bt);
      model.forward(Mode::infer);
      // The negative log-likelihood of the targets (the training loss adds label smoothing).
      const auto logits = model.output("logits");  // [B, T, vocab]
      for (std::int64_t r = 0; r < bt.B * bt.T; ++r) {
        if (bt.tgt_out[std::size_t(r)] == P.pad) continue;
        const float* l = logits.data + r * P.vocab;
        const double mx = *std::max_element(l, l + P.vocab);
        double z = 0;
        for (int v = 0; v < P.vocab; ++v) z += std::exp(double(l[v]) - mx);
        total += mx + std::log(z) - double(l[bt.tgt_out[std::size_t(r)]]);
        n += 1;
      }
    }
    return total / n;
  };
  auto make_translator = [&] { return models::Translator<P>(model.parameters(), Options().threads(a.threads)); };

  if (a.command == "eval") {
    auto translator = make_translator();
    if (task == "copy") {
      int exact = 0;
      for (const auto& e : copy_val) {
        const auto out = translator.greedy(e.src, 1, -1, 9);
        exact += out == std::vector<std::int32_t>(e.src.begin() + 1, e.src.end());
      }
      std::printf("copy task: %d of %zu held-out sequences copied exactly by greedy decoding\n", exact, copy_val.size());
      return 0;
    }
    std::printf("validation loss %.4f nats/token (negative log-likelihood)\n", validation_loss());
    const std::vector<Example>& test = tr.test;
    const std::size_t n = cfg["eval_sentences"].get<std::int64_t>() > 0 ? std::min<std::size_t>(test.size(), cfg["eval_sentences"]) : test.size();
    std::vector<std::string> refs, greedy, beam;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      refs.push_back(test[i].tgt_text);
      greedy.push_back(tr.tok->decode(translator.greedy(test[i].src, kBos, kEos, int(max_len))));
    }
    const double t_greedy = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto bo = models::BeamOptions().beam(cfg["beam"]).alpha(cfg["alpha"]).max_len(int(max_len));
    for (std::size_t i = 0; i < n; ++i) beam.push_back(tr.tok->decode(translator.search(test[i].src, kBos, kEos, bo)));
    const double t_beam = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - t_greedy;
    std::printf("test split: %zu sentences (EN -> DE), sacreBLEU-style corpus BLEU on detokenised text\n", n);
    std::printf("greedy:        %s  (%.1f s)\n", metrics::corpus_bleu(greedy, refs).str().c_str(), t_greedy);
    std::printf("beam %d, a %.1f: %s  (%.1f s)\n", bo.beam_, bo.alpha_, metrics::corpus_bleu(beam, refs).str().c_str(), t_beam);
    for (std::size_t i = 0; i < std::min<std::size_t>(n, 8); ++i)
      std::printf("\n  EN   %s\n  ref  %s\n  beam %s\n", test[i].src_text.c_str(), refs[i].c_str(), beam[i].c_str());
    if (!a.attention_png.empty()) {
      const std::string sentence = a.sentence.empty() ? test[0].src_text : a.sentence;
      std::vector<std::int32_t> src = tr.tok->encode(sentence);
      src.push_back(kEos);
      const auto out = translator.greedy(src, kBos, kEos, int(max_len));
      std::vector<std::int32_t> tgt_in{kBos};
      tgt_in.insert(tgt_in.end(), out.begin(), out.end());
      static constexpr const auto& M = MapGraph<P>::graph;
      Program<M> maps(Options().threads(a.threads));
      models::copy_weights(model.parameters(), maps, "attention maps");
      const std::int32_t sl = std::int32_t(src.size()), tl = std::int32_t(tgt_in.size());
      maps.set_input("src", std::span<const std::int32_t>(src), {1, sl});
      maps.set_input("src_len", std::span<const std::int32_t>(&sl, 1), {1});
      maps.set_input("tgt_in", std::span<const std::int32_t>(tgt_in), {1, tl});
      maps.set_input("tgt_len", std::span<const std::int32_t>(&tl, 1), {1});
      maps.forward(Mode::infer);
      auto pieces = [&](const std::vector<std::int32_t>& ids) {
        std::vector<std::string> v;
        for (auto id : ids) v.push_back(id == kBos ? "<s>" : id == kEos ? "</s>" : tr.tok->decode({id}));
        return v;
      };
      std::printf("\nattention of: %s -> %s\n", sentence.c_str(), tr.tok->decode(out).c_str());
      write_heatmaps(maps, a.attention_png, P.n_layer, P.heads, pieces(src), pieces(tgt_in));
    }
    return 0;
  }
  if (a.command != "train") throw usage_error("transformer has no command '" + a.command + "' (train, eval)");

  std::size_t n_params = 0;
  for (const auto& p : model.parameters()) n_params += std::size_t(p.value.numel);
  std::printf("ctgrad train transformer: task %s, %d+%d layers, d_model %d, %d heads, d_ff %d, %zu parameters, %d threads\n", task.c_str(),
              P.n_layer, P.n_layer, P.d_model, P.heads, P.d_ff, n_params, model.threads());
  if (task == "translate")
    std::printf("Ding EN->DE sentence pairs: %zu train / %zu validation / %zu test, shared BPE vocabulary of %d\n", tr.train.size(),
                tr.validation.size(), tr.test.size(), P.vocab);
  const std::int64_t first = opt.steps() + 1;
  if (first > steps) {
    std::printf("the checkpoint in %s is already at step %lld of %lld: nothing to train (raise --set steps=)\n", dir.c_str(),
                (long long)opt.steps(), (long long)steps);
    return 0;
  }
  if (first > 1) std::printf("resuming at step %lld from %s\n", (long long)first, ckpt.c_str());
  const auto schedule = optim::noam(P.d_model, cfg["warmup"], cfg["lr_factor"]);
  auto save = [&] { checkpoint::save_training<float>(ckpt, model, &opt, {{"config", cfg.dump()}, {"model", "transformer"}}); };
  TrainingLog log(dir, a.resume, first, steps, "nats/token (NLL)");
  std::vector<std::vector<std::int64_t>> epoch;
  std::uint64_t epoch_no = ~0ull;
  std::vector<Example> copy_batch;
  double last_val = -1;
  for (std::int64_t step = first; step <= steps; ++step) {
    Batch bt;
    if (task == "copy") {
      copy_batch.clear();
      std::vector<std::int64_t> idx;
      for (std::int64_t b = 0; b < batch; ++b) copy_batch.push_back(copy_example(seed, std::uint64_t(step * batch + b))), idx.push_back(b);
      bt = make_batch(copy_batch, idx);
    } else {
      // Step s takes batch (s - 1) mod n of epoch (s - 1) / n.
      const std::int64_t per_epoch = std::int64_t((train.size() + std::size_t(batch) - 1) / std::size_t(batch));
      const std::uint64_t e = std::uint64_t((step - 1) / per_epoch);
      if (e != epoch_no) epoch = epoch_batches(train, batch, seed, e), epoch_no = e;
      bt = make_batch(train, epoch[std::size_t((step - 1) % per_epoch)]);
    }
    feed(model, bt);
    model.zero_grad();
    model.forward();
    model.backward();
    opt.set_lr(schedule(step));
    model.execute([&] { opt.step(); });  // on the model's --threads
    const double loss = model.loss();  // before validation runs the model on other batches
    std::optional<double> v;
    if (step % eval_every == 0 || step == steps) last_val = *(v = log.untimed(validation_loss));
    log.step(step, loss, opt.lr(), double(bt.tokens()), v);
    if (v) log.untimed([&] { return save(), 0; });
    if (stop_on_interrupt(step, save, ckpt)) return 130;
  }
  log.close();
  plot(dir / "metrics.csv", dir / "loss.png", "nats/token");
  std::printf("done after %s of training: validation loss %.4f nats/token; checkpoint %s, plot %s\n", fmt_time(log.seconds()).c_str(), last_val,
              ckpt.c_str(), (dir / "loss.png").c_str());
  auto translator = make_translator();
  for (std::size_t i = 0; i < std::min<std::size_t>(val.size(), 3); ++i) {
    const auto out = translator.greedy(val[i].src, task == "copy" ? 1 : kBos, task == "copy" ? -1 : kEos, task == "copy" ? 9 : int(max_len));
    if (task == "copy") {
      std::string s, o;
      for (auto t : val[i].src) s += std::to_string(t) + " ";
      for (auto t : out) o += std::to_string(t) + " ";
      std::printf("  %s-> 1 %s\n", s.c_str(), o.c_str());
    } else {
      std::printf("  %s\n  -> %s\n", val[i].src_text.c_str(), tr.tok->decode(out).c_str());
    }
  }
  return 0;
}

}  // namespace

int transformer_command(const Args& a) {
  if (a.command == "sample") throw usage_error("transformer has no command 'sample' (train, eval)");
  const fs::path ckpt = fs::path(a.run_dir) / "checkpoint.safetensors";
  json cfg = apply_sets(default_config(), a);
  if (a.command != "train" || a.resume) {
    const json saved = checkpoint_config(ckpt, "transformer");
    if (a.command == "train") require_same(saved, cfg, {"task", "size", "batch", "max_len", "seed"}, a.run_dir);
    else cfg = apply_sets(saved, a);  // eval follows the checkpoint
    if (saved["task"] != cfg["task"] || saved["size"] != cfg["size"])
      throw usage_error("the checkpoint in " + a.run_dir + " is a " + saved["task"].get<std::string>() + " model of size " +
                        saved["size"].get<std::string>());
  }
  const std::string task = cfg["task"], size = cfg["size"];
  if (task == "copy") return run<models::kTransformerCopy>(a, cfg);
  if (task != "translate") throw usage_error("unknown task '" + task + "' (tasks: translate, copy)");
  if (size == "small") return run<models::kTransformerSmall>(a, cfg);
  if (size == "base") return run<models::kTransformerBase>(a, cfg);
  throw usage_error("unknown size '" + size + "' (sizes: small, base)");
}

}  // namespace ctgrad::cli
