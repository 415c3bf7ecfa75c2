// ctgrad train|eval|translate transformer: the encoder-decoder Transformer on the copy task or on
// EN->DE translation of the Ding dictionary's sentence pairs (docs/models/transformer.md).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/en_de.hpp>
#include <ctgrad/data/pairs.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/metrics/bleu.hpp>
#include <ctgrad/models/transformer.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>

#include <ctgrad/training/plot_data.hpp>

#include "../option_text.hpp"
#include "../output_file.hpp"
#include "../task.hpp"
#include "../variants/transformer.hpp"

namespace ctgrad::cli {
namespace {

namespace in = models::transformer_inputs;
namespace fs = std::filesystem;
using training::gnuplot_quote;
using training::Role;

// The preset's graph: its hyperparameters are every variant's.
constexpr auto kHyperGraph = freeze<models::transformer<models::kTransformerSmall>>();

// The paper's recipe: Adam (0.9, 0.98, 1e-9), Noam schedule, label smoothing 0.1 and dropout 0.1
// (hyperparameters of the model). Warm-up 4000 for base; shorter for the small runs on 2 cores,
// with the rate halved: at factor 1 and warm-up 800 (peak 2.2e-3) the small model's attention
// collapsed onto single keys and it learned to ignore the source (docs/models/transformer.md).
// The copy task trains without dropout or smoothing.
Schema transformer_schema() {
  Schema s;
  s.choice("task", "translate", {"translate", "copy"}, "EN->DE translation, or the copy task", Role::model)
      .choice("size", "small", {"small", "base"}, "preset of the translation model (copy has its own)", Role::model)
      .choice("data", "sentences", {"sentences", "ding", "ding+wesnoth"},
              "sentences: the Ding dictionary's sentence pairs (split by sentence); ding: all its pairs, phrases too, split by entry; "
              "ding+wesnoth: and the Battle for Wesnoth's dialogue (scripts/setup_wesnoth.sh)",
              Role::model)
      .choice("vocab", "8000", {"4000", "8000", "16000"},
              "pieces of the shared BPE vocabulary (size=small; compiled variants: 4000 and 16000 with the preset architecture)", Role::model)
      .real("train_fraction", 1.0, {.min = 0, .max = 1, .min_open = true},
            "train on this fraction of the training sentences and of the phrases (a fixed random subset; its vocabulary too): the data-size curve",
            Role::run)
      .real("phrase_weight", 1.0, {.min = 0, .max = 100}, "data=ding: dictionary phrases per sentence pair in each epoch (0: none)", Role::run)
      .integer("batch", 64, {.min = 1, .max = 1 << 16}, "sentence pairs per step", Role::run)
      .integer("batch_tokens", 0, {.min = 0, .max = 1 << 24},
               "tokens per step instead (the paper's batching: pairs of similar length, padded rows x longest side at most this; 0: batch pairs)",
               Role::run)
      .integer("max_len", 64, {.min = 4, .max = 1 << 12}, "tokens per sentence at most (longer training pairs are dropped)", Role::run)
      .integer("steps", 3000, {.min = 1, .max = std::int64_t(1) << 40}, "training steps")
      .real("lr_factor", 0.5, {.min = 0, .max = 100, .min_open = true}, "the Noam schedule's factor")
      .integer("warmup", 1000, {.min = 1}, "warm-up steps of the Noam schedule")
      .integer("eval_every", 500, {.min = 1}, "steps between validations and checkpoints")
      .integer("keep_checkpoints", 0, {.min = 0, .max = 1000}, "keep the last k checkpoints for averaging (ctgrad average-checkpoints)")
      .integer("beam", 4, {.min = 1, .max = 1000}, "beam width of eval")
      .real("alpha", 0.6, {.min = 0, .max = 10}, "length penalty of the beam search")
      .integer("eval_sentences", 0, {.min = 0}, "test sentences for BLEU (0: all)")
      .integer("val_bleu", 0, {.min = 0}, "validation sentences translated greedily at each validation for its BLEU (0: none)");
  add_arch_keys(s, models::kTransformerSmall.arch);
  s.added_later({"data", "vocab"});
  add_common_keys(s);
  add_hyper_keys(s, kHyperGraph);
  return s;
}

Schema eval_options() {
  Schema s;
  s.text("attention-png", "", "folder for attention heatmaps (gnuplot) of one sentence")
      .text("sentence", "", "the sentence of the heatmaps (default: the first test sentence)");
  return s;
}

Schema translate_options() {
  Schema s;
  s.text("text", "", "the English sentence (without it: a sentence per line of standard input)")
      .integer("beam", 4, {.min = 1, .max = 1000}, "1: greedy")
      .real("alpha", 0.6, {.min = 0, .max = 10}, "length penalty")
      .integer("batch", 32, {.min = 1, .max = 4096}, "sentences decoded at once from standard input");
  return s;
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

void feed(Executor<float>& model, const Batch& b) {
  model.set_input(in::src, std::span<const std::int32_t>(b.src), {b.B, b.S});
  model.set_input(in::src_len, std::span<const std::int32_t>(b.src_len), {b.B});
  model.set_input(in::tgt_in, std::span<const std::int32_t>(b.tgt_in), {b.B, b.T});
  model.set_input(in::tgt_len, std::span<const std::int32_t>(b.tgt_len), {b.B});
  model.set_input(in::tgt_out, std::span<const std::int32_t>(b.tgt_out), {b.B, b.T});
}

// The examples of an epoch (indices into `ex`), `batch` at a time, or with `tokens` > 0 as many
// as fit in `tokens` (rows x the longest side of the batch, padding included: the paper's
// batches by token count). Shuffled, then sorted by length within pools of (up to) 50 batches, or
// the whole epoch for token batches (less padding), batch order shuffled again. A function of
// (seed, epoch): a resumed run sees the same.
std::vector<std::vector<std::int64_t>> epoch_batches(const std::vector<Example>& ex, std::span<const std::int64_t> members, std::int64_t batch,
                                                     std::int64_t tokens, std::uint64_t seed, std::uint64_t epoch) {
  const auto perm = data::shuffled(std::int64_t(members.size()), seed, epoch);
  std::vector<std::vector<std::int64_t>> out;
  const std::int64_t n = std::int64_t(perm.size());
  const std::int64_t pool = tokens > 0 || batch > n / 50 ? n : 50 * batch;  // no overflow for any batch
  auto longest = [&](std::int64_t i) {
    const auto& e = ex[std::size_t(i)];
    return std::int64_t(std::max(e.src.size(), e.tgt.size() - 1));
  };
  for (std::int64_t p0 = 0; p0 < n; p0 += pool) {
    std::vector<std::int64_t> chunk;
    for (std::int64_t k = p0; k < std::min(p0 + pool, n); ++k) chunk.push_back(members[std::size_t(perm[std::size_t(k)])]);
    if (tokens <= 0) {  // by source length (less padding of the sources)
      std::stable_sort(chunk.begin(), chunk.end(), [&](auto x, auto y) { return ex[std::size_t(x)].src.size() < ex[std::size_t(y)].src.size(); });
      for (std::size_t b = 0; b < chunk.size(); b += std::size_t(batch))
        out.emplace_back(chunk.begin() + std::ptrdiff_t(b), chunk.begin() + std::ptrdiff_t(std::min(chunk.size(), b + std::size_t(batch))));
      continue;
    }
    std::stable_sort(chunk.begin(), chunk.end(), [&](auto x, auto y) { return longest(x) < longest(y); });
    std::vector<std::int64_t> cur;
    for (std::int64_t i : chunk) {  // sorted by length: the newest is the longest
      if (!cur.empty() && std::int64_t(cur.size() + 1) * longest(i) > tokens) out.push_back(std::move(cur)), cur.clear();
      cur.push_back(i);
    }
    if (!cur.empty()) out.push_back(std::move(cur));
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

// One PNG per attention kind and layer, the heads side by side, tokens on the axes (as d2l shows them).
void write_heatmaps(const Executor<float>& prog, const fs::path& out, int layers, int heads, const std::vector<std::string>& src_tokens,
                    const std::vector<std::string>& tgt_tokens) {
  if (!fs::exists("/usr/bin/gnuplot")) throw config_error("--attention-png needs gnuplot (apt-get install gnuplot-nox)");
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
      const fs::path png = out / (std::string(k.name) + "_layer" + std::to_string(l) + ".png");
      std::ostringstream numbers;
      for (int h = 0; h < heads; ++h) {
        for (std::int64_t r = 0; r < R; ++r)
          for (std::int64_t c = 0; c < Cn; ++c) numbers << w.data[(h * R + r) * Cn + c] << (c + 1 < Cn ? " " : "\n");
        numbers << "\n\n";
      }
      const training::PlotData data(out, numbers.str());  // a new hidden file of its own, removed once drawn
      std::ostringstream script;
      script << "set terminal pngcairo noenhanced size " << 360 * heads << ",420 font ',8'\nset output ARG1\n"
             << "set multiplot layout 1," << heads << " title " << gnuplot_quote(std::string(k.title) + ", layer " + std::to_string(l)) << "\n"
             << "set palette grey negative\nset cbrange [0:1]\nunset colorbox\nset yrange [" << R << "-0.5:-0.5]\nset xrange [-0.5:" << Cn << "-0.5]\n"
             << "set xtics rotate by 90 right " << tics(k.cols) << "\nset ytics " << tics(k.rows) << "\nset size ratio -1\n";
      for (int h = 0; h < heads; ++h)
        script << "set title 'head " << h << "'\nplot ARG2 index " << h << " matrix with image pixels notitle\n";
      script << "unset multiplot\n";
      const bool drawn = training::gnuplot(script.str(), png, {data.path()});
      if (!drawn) throw std::runtime_error("gnuplot failed to draw " + png.string());
      std::printf("wrote %s\n", training::printable(png.string()).c_str());
    }
}

// The registered preset of a config: the copy task, a size, or the small size with another vocabulary
// (apps/variants/transformer.cpp compiles those with the preset's architecture only).
std::string transformer_preset(const Config& c) {
  if (c.text("task") == "copy") {
    if (c.text("vocab") != "8000") throw config_error("vocab=" + c.text("vocab") + ": the copy task has its own 11 symbols (vocab applies to task=translate)");
    return "task=copy";
  }
  if (c.text("vocab") == "8000") return "size=" + c.text("size");
  if (c.text("size") != "small") throw config_error("vocab=" + c.text("vocab") + " is compiled for size=small only (size=" + c.text("size") + " has 8000)");
  return "size=small vocab=" + c.text("vocab");
}

template <models::TransformerConfig P, int Order>
class TransformerSession : public Session {
 public:
  TransformerSession(const Config& c, const Context& ctx)
      : c_(c), ctx_(ctx), copy_(c.text("task") == "copy"),
        programs_(find_variant<TransformerPrograms>("transformer", transformer_preset(c), c,
                                                    c.text("vocab") == "8000" ? transformer_space<P, Order> : transformer_space<P, 0>, P.heads)),
        model_(programs_.train(options(c, ctx))), opt_(model_->parameters(), optim::AdamOptions{.beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9}),
        vocab_(programs_.config.vocab), batch_(c.integer("batch")),
        max_len_(c.integer("max_len")), seed_(data_seed(c)) {
    const std::int64_t len = copy_ ? 10 : max_len_;
    if (programs_.config.arch.pos == layers::Pos::learned && len > programs_.config.max_positions)
      throw config_error("pos=learned has a table of " + std::to_string(programs_.config.max_positions) + " positions: max_len " +
                         c.show("max_len") + " is longer");
    // Token batches hold up to batch_tokens tokens: as many rows of max_len as that is, at most.
    const std::int64_t rows = c.integer("batch_tokens") > 0 ? std::max<std::int64_t>(1, (c.integer("batch_tokens") + len - 1) / len) : batch_;
    check_fits(*model_, {rows, len, len, 1, 1, 1}, 40.0 * double(rows) * double(len),
               c.integer("batch_tokens") > 0 ? "batch_tokens " + c.show("batch_tokens") + " (max_len " + c.show("max_len") + ")"
                                             : "batch " + c.show("batch") + " x max_len " + c.show("max_len"));
  }
  Executor<float>& model() override { return *model_; }
  optim::Optimizer<float>& optimizer() override { return opt_; }

  void prepare() override {
    if (copy_) {
      for (std::uint64_t n = 0; n < 256; ++n) val_.push_back(copy_example(seed_ + 1000, n));  // never trained on
    } else {
      load_translation_data();
    }
    if (ctx_.command != "train") return;
    const auto& v = programs_.config;
    std::printf("ctgrad train transformer: task %s, %d+%d layers, d_model %d, %d heads, d_ff %d (%s), %lld parameters, %d threads\n",
                c_.text("task").c_str(), v.n_layer, v.n_layer, v.d_model, v.heads, v.d_ff, describe_arch(v.arch).c_str(),
                (long long)model_->parameter_count(), model_->threads());
    if (!copy_) {
      std::printf("EN->DE (data=%s): %lld sentence pairs and %lld dictionary phrases train (%.1f phrases per pair an epoch) / %zu validation / "
                  "%zu test sentence pairs%s, shared BPE vocabulary of %d\n",
                  c_.text("data").c_str(), (long long)sentences_, (long long)(std::int64_t(train_.size()) - sentences_), c_.real("phrase_weight"),
                  val_.size(), test_.size(), wesnoth_test_.empty() ? "" : (" (+ " + std::to_string(wesnoth_test_.size()) + " Wesnoth test)").c_str(),
                  vocab_);
      if (dropped_ > 0) std::printf("%zu of the game's pairs dropped: a side of theirs is a held-out dictionary pair's, or trains\n", dropped_);
      if (c_.integer("batch_tokens") > 0) std::printf("batches of up to %lld tokens (rows x longest side)\n", (long long)c_.integer("batch_tokens"));
    }
  }

  checkpoint::Metadata metadata() override {
    if (copy_) return {};
    return {{"tokenizer", "tokenizer.model"}, {"tokenizer_hash", file_hash(ctx_.folder.file("tokenizer.model"))}};
  }

  std::vector<std::string> metrics() const override {
    if (!copy_ && c_.integer("val_bleu") > 0) return {"loss", "bleu"};
    return {"loss"};
  }
  training::LoopOptions loop() override {
    return {.steps = c_.integer("steps"),
            .eval_every = c_.integer("eval_every"),
            .lr = optim::noam(P.d_model, c_.integer("warmup"), c_.real("lr_factor")),
            .unit = "nats/token (NLL)",
            .items = "tok",
            .keep_checkpoints = int(c_.integer("keep_checkpoints"))};
  }

  training::Run run() override {
    return {.model = *model_, .optimizer = opt_, .feed = [this](std::int64_t step) {
              // This rank's pairs of the step's batch (all of them in one process), padded to
              // their own longest: the loss terms (target tokens) weight the ranks' gradients.
              Batch bt;
              if (copy_) {
                copy_batch_.clear();
                std::vector<std::int64_t> idx;
                for (std::int64_t b = 0; b < batch_; ++b)
                  copy_batch_.push_back(copy_example(seed_, std::uint64_t(step * batch_ + b))), idx.push_back(b);
                bt = make_batch(copy_batch_, shard_of(idx));
              } else {
                bt = make_batch(train_, shard_of(training_batch(step)));
              }
              feed(*model_, bt);
              shard_tokens_ = bt.tokens();
              return double(bt.tokens());
            },
            .validate = [this] {
              training::Metrics m{{{"loss", validation_nll()}}};
              if (!copy_ && c_.integer("val_bleu") > 0) m.values.emplace_back("bleu", validation_bleu(std::size_t(c_.integer("val_bleu"))));
              return m;
            },
            .loss_terms = [this] { return double(shard_tokens_); }};
  }

  // Corpus BLEU of greedy translations of the first n validation sentences.
  double validation_bleu(std::size_t n) {
    auto tr = translator();
    std::vector<std::string> refs, hyps;
    for (std::size_t i = 0; i < std::min(n, val_.size()) && !training::interrupted(); ++i) {
      refs.push_back(val_[i].tgt_text);
      hyps.push_back(tok_->decode(tr.greedy(val_[i].src, kBos, kEos, int(max_len_))));
    }
    return metrics::corpus_bleu(hyps, refs).score;
  }

  int after_training(const training::Outcome&) override {
    auto tr = translator();
    for (std::size_t i = 0; i < std::min<std::size_t>(val_.size(), 3) && !training::interrupted(); ++i) {
      const auto out = tr.greedy(val_[i].src, copy_ ? 1 : kBos, copy_ ? -1 : kEos, copy_ ? 9 : int(max_len_));
      if (copy_) {
        std::string s, o;
        for (auto t : val_[i].src) s += std::to_string(t) + " ";
        for (auto t : out) o += std::to_string(t) + " ";
        std::printf("  %s-> 1 %s\n", s.c_str(), o.c_str());
      } else {
        std::printf("  %s\n  -> %s\n", val_[i].src_text.c_str(), tok_->decode(out).c_str());
      }
    }
    return training::interrupted() ? 130 : 0;
  }

  int eval(const Config& o) override {
    if (const std::string dir = one_line("--attention-png", o.text("attention-png")); !dir.empty()) {  // before the evaluation, not after it
      if (copy_) throw config_error("--attention-png draws a translation model's attention: this run is the copy task");
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec || !fs::is_directory(dir, ec)) throw config_error("--attention-png " + dir + ": cannot make the folder (" + (ec ? ec.message() : "a file is in the way") + ")");
      for (const char* kind : {"enc", "dec", "cross"})  // a user's file of those names is kept
        for (int l = 0; l < P.n_layer; ++l)
          if (const fs::path png = fs::path(dir) / (std::string(kind) + "_layer" + std::to_string(l) + ".png"); fs::exists(fs::symlink_status(png, ec)))
            throw config_error("--attention-png " + dir + " already holds " + png.filename().string() + ": move it away, or give another folder");
    }
    auto tr = translator();
    if (copy_) {
      int exact = 0;
      for (const auto& e : val_) {
        const auto out = tr.greedy(e.src, 1, -1, 9);
        exact += out == std::vector<std::int32_t>(e.src.begin() + 1, e.src.end());
      }
      std::printf("copy task: %d of %zu held-out sequences copied exactly by greedy decoding\n", exact, val_.size());
      return 0;
    }
    const double nll = validation_nll();
    if (!std::isfinite(nll)) throw std::runtime_error("the validation loss is not finite: the checkpoint's model is broken");
    std::printf("validation loss %.4f nats/token (negative log-likelihood)\n", nll);
    const std::size_t n = c_.integer("eval_sentences") > 0 ? std::min<std::size_t>(test_.size(), std::size_t(c_.integer("eval_sentences"))) : test_.size();
    // Decoded 32 sentences at a time (each sentence's result is its own search's).
    auto decode_all = [&](const std::vector<Example>& set, std::size_t count, const models::BeamOptions& bo, double& seconds) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::string> out;
      for (std::size_t i = 0; i < count && !training::interrupted(); i += 32) {
        std::vector<std::vector<std::int32_t>> srcs;
        for (std::size_t j = i; j < std::min(count, i + 32); ++j) srcs.push_back(set[j].src);
        for (const auto& ids : tr.search_batch(srcs, kBos, kEos, bo)) out.push_back(tok_->decode(ids));
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return out;
    };
    const models::BeamOptions gr{.beam = 1, .alpha = 0, .max_len = int(max_len_), .stop = training::interrupted};
    const models::BeamOptions bo{.beam = int(c_.integer("beam")), .alpha = c_.real("alpha"), .max_len = int(max_len_), .stop = training::interrupted};
    std::vector<std::string> refs, beam;
    auto score = [&](const std::vector<Example>& set, std::size_t count, const char* name) {
      refs.clear();
      for (std::size_t i = 0; i < count; ++i) refs.push_back(set[i].tgt_text);
      double t_greedy = 0, t_beam = 0;
      const std::vector<std::string> greedy = decode_all(set, count, gr, t_greedy);
      beam = decode_all(set, count, bo, t_beam);
      if (training::interrupted()) return;
      std::printf("%s: %zu sentences (EN -> DE), sacreBLEU-style corpus BLEU on detokenised text\n", name, count);
      std::printf("greedy:        %s  (%.1f s, %.1f sentences/s)\n", metrics::corpus_bleu(greedy, refs).str().c_str(), t_greedy,
                  double(count) / t_greedy);
      std::printf("beam %d, a %.1f: %s  (%.1f s, %.1f sentences/s)\n", bo.beam, bo.alpha, metrics::corpus_bleu(beam, refs).str().c_str(), t_beam,
                  double(count) / t_beam);
    };
    if (!wesnoth_test_.empty()) {
      const std::size_t nw = c_.integer("eval_sentences") > 0 ? std::min<std::size_t>(wesnoth_test_.size(), std::size_t(c_.integer("eval_sentences")))
                                                             : wesnoth_test_.size();
      score(wesnoth_test_, nw, "Wesnoth test split");
    }
    score(test_, n, "test split");
    if (training::interrupted()) return 130;
    for (std::size_t i = 0; i < std::min<std::size_t>(n, 8); ++i)
      std::printf("\n  EN   %s\n  ref  %s\n  beam %s\n", test_[i].src_text.c_str(), refs[i].c_str(), beam[i].c_str());
    if (!o.text("attention-png").empty()) heatmaps(o.text("attention-png"), o.text("sentence").empty() ? test_[0].src_text : o.text("sentence"));
    return 0;
  }

  int command(const std::string& name, const Config& o) override {
    if (name == "export-batches") return export_batches(o);
    if (copy_) throw config_error("translate needs a translation model (this run is the copy task)");
    const models::BeamOptions bo{.beam = int(o.integer("beam")), .alpha = o.real("alpha"), .max_len = int(max_len_), .stop = training::interrupted};
    auto tr = translator();
    if (o.was_set("text")) {
      if (o.text("text").find_first_not_of(" \t\n") == std::string::npos) throw config_error("--text is empty: give a sentence to translate");
      const auto out = tr.search(encode_source(o.text("text"), "--text"), kBos, kEos, bo);
      if (training::interrupted()) return 130;
      std::printf("%s\n", tok_->decode(out).c_str());
      return 0;
    }
    // Standard input, a sentence per line, a German line for each (an empty line for an empty
    // one): `batch` lines decoded at once, or each line as it comes when a person types them.
    const std::size_t batch = isatty(0) ? 1 : std::size_t(o.integer("batch"));
    std::vector<std::string> lines;
    auto flush = [&] {
      if (training::interrupted()) return;  // a search cut short is not a translation
      std::vector<std::vector<std::int32_t>> srcs;
      std::vector<std::size_t> at;
      for (std::size_t i = 0; i < lines.size(); ++i)
        if (lines[i].find_first_not_of(" \t\r") != std::string::npos) srcs.push_back(encode_source(lines[i], "line " + std::to_string(i + 1))), at.push_back(i);
      const auto outs = tr.search_batch(srcs, kBos, kEos, bo);
      std::vector<std::string> german(lines.size());
      for (std::size_t k = 0; k < at.size(); ++k) german[at[k]] = tok_->decode(outs[k]);
      if (training::interrupted()) return;
      for (const auto& g : german) std::printf("%s\n", g.c_str());
      std::fflush(stdout);
      lines.clear();
    };
    // Waits for input in slices, so that Ctrl-C ends a read at a terminal (the signal handlers
    // restart interrupted reads).
    auto wait_for_line = [] {
      while (!training::interrupted()) {
        if (std::cin.rdbuf()->in_avail() > 0) return true;
        pollfd p{0, POLLIN, 0};
        const int ready = ::poll(&p, 1, 200);
        if (ready < 0 && errno == EINTR) continue;  // a signal: the loop asks whether it was Ctrl-C
        if (ready != 0) return true;                // input, end of input, or an error: getline tells
      }
      return false;
    };
    for (std::string line; wait_for_line() && std::getline(std::cin, line);) {
      lines.push_back(line);
      if (lines.size() >= batch) flush();
    }
    if (training::interrupted()) return 130;
    flush();
    return 0;
  }

 private:
  static Options options(const Config& c, const Context& ctx) { return program_options(c, ctx.threads, kHyperGraph); }

  models::Seq2SeqSearch translator() {
    const Options o{.threads = ctx_.threads};
    const auto& v = programs_.config;
    return models::Seq2SeqSearch(programs_.encoder(o), programs_.step(o),
                                 {v.n_layer, v.heads, v.d_model / v.heads, v.vocab, v.arch.pos != layers::Pos::none}, model_->parameters());
  }

  // A source of at most max_len tokens, </s> included; `what` names a user's text, which is told
  // when it is cut.
  std::vector<std::int32_t> encode_source(const std::string& text, const std::string& what = "") const {
    std::vector<std::int32_t> src = tok_->encode(text);
    if (std::int64_t(src.size()) >= max_len_) {
      if (!what.empty())
        std::fprintf(stderr, "ctgrad: warning: %s is %zu tokens, more than the model reads (max_len %lld): translating its first %lld\n", what.c_str(),
                     src.size(), (long long)max_len_, (long long)(max_len_ - 1));
      src.resize(std::size_t(max_len_ - 1));
    }
    src.push_back(kEos);
    return src;
  }

  void load_translation_data() {
    // The pairs (data/en_de.hpp): the dictionary's sentence pairs, or every pair of it split by
    // entry with phrases training too, and the game's dialogue, nothing of a held-out line training.
    data::EnDeCorpus corpus = data::en_de_corpus(c_.text("data"));
    if (const double f = c_.real("train_fraction"); f < 1) {  // the same subset for every seed
      auto part = [f](std::size_t n) { return std::size_t(std::ceil(f * double(n))); };
      data::fixed_subset(corpus.train_sentences, part(corpus.train_sentences.size()), "train_fraction sentences");
      data::fixed_subset(corpus.train_phrases, part(corpus.train_phrases.size()), "train_fraction phrases");
    }
    const auto& train = corpus.train_sentences;
    dropped_ = corpus.dropped;
    const auto &phrases = corpus.train_phrases, &validation = corpus.validation, &test = corpus.test, &wesnoth_test = corpus.wesnoth_test;
    const fs::path model_file = ctx_.folder.file("tokenizer.model");
    if (!ctx_.from_checkpoint) {
      std::string text;  // one shared vocabulary for both languages, from the training sentences only
      for (const auto& p : train) text += p.en + "\n" + p.de + "\n";
      tok_ = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::train(
          text, ctx_.folder.file("tokenizer"),
          {.vocab_size = vocab_, .model_type = "bpe", .seed = seed_, .unk_id = 1, .bos_id = kBos, .eos_id = kEos, .pad_id = kPad},
          ctx_.cache));
    } else {
      if (!fs::exists(model_file)) throw config_error("the tokenizer " + model_file.string() + " is missing");
      tok_ = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::load(model_file));
    }
    if (tok_->vocab_size() != vocab_ || tok_->pad_id() != kPad || tok_->bos_id() != kBos || tok_->eos_id() != kEos)
      throw config_error("the tokenizer " + model_file.string() + " does not match the model (vocabulary " + std::to_string(tok_->vocab_size()) + ")");
    auto encode = [&](const std::vector<data::SentencePair>& pairs, bool drop_long) {
      std::vector<Example> out;
      std::vector<std::string> en, de;
      for (const auto& p : pairs) en.push_back(p.en), de.push_back(p.de);
      std::vector<std::vector<std::int32_t>> src, tgt;
      model_->execute([&] { src = tok_->encode_all(en, ctx_.cache), tgt = tok_->encode_all(de, ctx_.cache); });
      for (std::size_t i = 0; i < pairs.size(); ++i) {
        const auto& p = pairs[i];
        Example e;
        e.src = std::move(src[i]);
        e.tgt = std::move(tgt[i]);
        if (drop_long && (std::int64_t(e.src.size()) >= max_len_ || std::int64_t(e.tgt.size()) >= max_len_)) continue;
        if (std::int64_t(e.src.size()) >= max_len_) e.src.resize(std::size_t(max_len_ - 1));
        e.src.push_back(kEos);
        e.tgt.insert(e.tgt.begin(), kBos);
        e.tgt.push_back(kEos);
        e.src_text = p.en, e.tgt_text = p.de;
        out.push_back(std::move(e));
      }
      return out;
    };
    val_ = encode(validation, true);
    test_ = encode(test, false);  // every test sentence counts for BLEU
    wesnoth_test_ = encode(wesnoth_test, false);
    if (ctx_.command != "train" && ctx_.command != "export-batches") return;  // the training pairs: for training only
    train_ = encode(train, true);
    sentences_ = std::int64_t(train_.size());
    for (auto& e : encode(phrases, true)) train_.push_back(std::move(e));
    if (sentences_ == 0)
      throw config_error("no training sentence pair fits in max_len " + c_.show("max_len") + " tokens: raise --set max_len");
  }

  // The run's training batches of steps 1..N (as train feeds them), its validation batches (as
  // validation_nll makes them) and the test sources, for another framework to train and decode
  // the same (bench/reference/train_transformer.py); the test references beside, one per line.
  int export_batches(const Config& o) {
    check_output_file(o.text("out"), "--out", o.flag("overwrite"), ctx_.folder);
    check_output_file(o.text("out") + ".test.de", "--out", o.flag("overwrite"), ctx_.folder);  // the references beside it
    if (copy_) throw config_error("export-batches exports a translation run (this run is the copy task)");
    struct Set {
      std::vector<std::int32_t> src, src_len, tgt_in, tgt_out, tgt_len, shapes;  // shapes: B, S, T per batch
      void add(const Batch& b) {
        src.insert(src.end(), b.src.begin(), b.src.end());
        src_len.insert(src_len.end(), b.src_len.begin(), b.src_len.end());
        tgt_in.insert(tgt_in.end(), b.tgt_in.begin(), b.tgt_in.end());
        tgt_out.insert(tgt_out.end(), b.tgt_out.begin(), b.tgt_out.end());
        tgt_len.insert(tgt_len.end(), b.tgt_len.begin(), b.tgt_len.end());
        shapes.insert(shapes.end(), {std::int32_t(b.B), std::int32_t(b.S), std::int32_t(b.T)});
      }
    } train, val;
    const std::int64_t steps = o.integer("steps");
    for (std::int64_t step = 1; step <= steps && !training::interrupted(); ++step) train.add(make_batch(train_, training_batch(step)));
    std::vector<std::int64_t> idx;
    for (std::int64_t i = 0; i < std::int64_t(val_.size()); ++i) idx.push_back(i);
    std::stable_sort(idx.begin(), idx.end(), [&](auto x, auto y) { return val_[std::size_t(x)].src.size() < val_[std::size_t(y)].src.size(); });
    for (std::size_t b = 0; b < idx.size(); b += std::size_t(batch_))
      val.add(make_batch(val_, std::span<const std::int64_t>(idx).subspan(b, std::min(idx.size() - b, std::size_t(batch_)))));
    std::vector<std::int32_t> test_src, test_offsets{0};
    std::string refs;
    for (const Example& e : test_) {
      test_src.insert(test_src.end(), e.src.begin(), e.src.end());
      test_offsets.push_back(std::int32_t(test_src.size()));
      refs += e.tgt_text + "\n";
    }
    if (training::interrupted()) return 130;
    std::vector<checkpoint::TensorView> t;
    for (auto [name, set] : {std::pair{"train", &train}, std::pair{"val", &val}}) {
      const std::string p(name);
      const std::int64_t n = std::int64_t(set->shapes.size() / 3);
      t.push_back(checkpoint::view_of<std::int32_t>(p + ".shapes", set->shapes, {n, 3}));
      for (auto [field, v] : {std::pair{".src", &set->src}, std::pair{".src_len", &set->src_len}, std::pair{".tgt_in", &set->tgt_in},
                              std::pair{".tgt_out", &set->tgt_out}, std::pair{".tgt_len", &set->tgt_len}})
        t.push_back(checkpoint::view_of<std::int32_t>(p + field, *v, {std::int64_t(v->size())}));
    }
    t.push_back(checkpoint::view_of<std::int32_t>("test.src", test_src, {std::int64_t(test_src.size())}));
    t.push_back(checkpoint::view_of<std::int32_t>("test.offsets", test_offsets, {std::int64_t(test_offsets.size())}));
    const std::string out = o.text("out");
    checkpoint::save(out, t, {{"config", c_.to_json()}, {"vocab", std::to_string(vocab_)}, {"d_model", std::to_string(P.d_model)}});
    checkpoint::write_atomically(out + ".test.de", refs);
    std::printf("wrote %s: %lld training batches, %zu validation batches, %zu test sources (references: %s.test.de)\n", out.c_str(),
                (long long)steps, val.shapes.size() / 3, test_.size(), out.c_str());
    return 0;
  }

  // The examples of epoch e: every sentence pair, and phrase_weight as many dictionary phrases,
  // the next ones of a fixed shuffle of them (each phrase comes once before any comes twice).
  std::vector<std::int64_t> epoch_members(std::uint64_t e) const {
    std::vector<std::int64_t> m(static_cast<std::size_t>(sentences_));
    for (std::int64_t i = 0; i < sentences_; ++i) m[std::size_t(i)] = i;
    const std::int64_t phrases = std::int64_t(train_.size()) - sentences_;
    const std::int64_t take = std::min(phrases, std::int64_t(std::llround(c_.real("phrase_weight") * double(sentences_))));
    if (phrases > 0 && take > 0) {
      if (phrase_order_.empty()) phrase_order_ = data::shuffled(phrases, seed_ ^ 0x7068726173ull, 0);
      for (std::int64_t k = 0; k < take; ++k) m.push_back(sentences_ + phrase_order_[std::size_t((std::int64_t(e) * take + k) % phrases)]);
    }
    return m;
  }
  // The batch of step s (1-based): epochs in order, each epoch's batches in order; a function of
  // s alone, so a resumed run continues with the same batches.
  // This rank's rows of a batch's rows (all of them in one process).
  std::vector<std::int64_t> shard_of(std::span<const std::int64_t> rows) const {
    const std::int64_t n = std::int64_t(rows.size());
    if (ctx_.shard.rows(n) == 0)
      throw std::runtime_error("a batch of " + std::to_string(n) + " pairs has none for rank " + std::to_string(ctx_.shard.index) +
                               " of " + std::to_string(ctx_.shard.count) + ": raise batch_tokens or use fewer ranks");
    return {rows.begin() + ctx_.shard.begin(n), rows.begin() + ctx_.shard.end(n)};
  }
  std::int64_t shard_tokens_ = 0;

  std::span<const std::int64_t> training_batch(std::int64_t step) {
    std::int64_t first = 1;  // the first step of epoch e
    for (std::uint64_t e = 0;; ++e) {
      if (epoch_sizes_.size() <= e) {
        const auto members = epoch_members(e);
        epoch_sizes_.push_back(std::int64_t(epoch_batches(train_, members, batch_, c_.integer("batch_tokens"), seed_, e).size()));
      }
      if (epoch_sizes_[e] == 0) throw std::runtime_error("epoch " + std::to_string(e) + " has no training batch");
      if (step < first + epoch_sizes_[e]) {
        if (e != epoch_no_) {
          const auto members = epoch_members(e);
          epoch_ = epoch_batches(train_, members, batch_, c_.integer("batch_tokens"), seed_, e), epoch_no_ = e;
        }
        return epoch_[std::size_t(step - first)];
      }
      first += epoch_sizes_[e];
    }
  }

  // The negative log-likelihood of the validation targets (the training loss adds label smoothing).
  double validation_nll() {
    double total = 0, n = 0;
    std::vector<std::int64_t> idx;
    for (std::int64_t i = 0; i < std::int64_t(val_.size()); ++i) idx.push_back(i);
    std::stable_sort(idx.begin(), idx.end(), [&](auto x, auto y) { return val_[std::size_t(x)].src.size() < val_[std::size_t(y)].src.size(); });
    const EvalShard shard{ctx_.comm};
    for (std::size_t b = 0; b < idx.size() && !training::interrupted(); b += std::size_t(batch_)) {
      if (!shard.mine(std::int64_t(b) / batch_)) continue;
      const Batch bt = make_batch(val_, std::span<const std::int64_t>(idx).subspan(b, std::min(idx.size() - b, std::size_t(batch_))));
      feed(*model_, bt);
      model_->forward(Mode::infer);
      const auto logits = model_->output("logits");  // [B, T, vocab]
      for (std::int64_t r = 0; r < bt.B * bt.T; ++r) {
        if (bt.tgt_out[std::size_t(r)] == P.pad) continue;
        const float* l = logits.data + r * vocab_;
        const double mx = *std::max_element(l, l + vocab_);
        double z = 0;
        for (int v = 0; v < vocab_; ++v) z += std::exp(double(l[v]) - mx);
        total += mx + std::log(z) - double(l[bt.tgt_out[std::size_t(r)]]);
        n += 1;
      }
    }
    double sums[2] = {total, n};
    shard.sum(sums);
    return sums[0] / sums[1];
  }

  void heatmaps(const std::string& dir, const std::string& sentence) {
    auto tr = translator();
    const std::vector<std::int32_t> src = encode_source(sentence);
    const auto out = tr.greedy(src, kBos, kEos, int(max_len_));
    std::vector<std::int32_t> tgt_in{kBos};
    tgt_in.insert(tgt_in.end(), out.begin(), out.end());
    const auto owned = programs_.maps(Options{.threads = ctx_.threads});
    Executor<float>& maps = *owned;
    models::copy_weights(model_->parameters(), maps, "attention maps");
    const std::int32_t sl = std::int32_t(src.size()), tl = std::int32_t(tgt_in.size());
    maps.set_input(in::src, std::span<const std::int32_t>(src), {1, sl});
    maps.set_input(in::src_len, std::span<const std::int32_t>(&sl, 1), {1});
    maps.set_input(in::tgt_in, std::span<const std::int32_t>(tgt_in), {1, tl});
    maps.set_input(in::tgt_len, std::span<const std::int32_t>(&tl, 1), {1});
    maps.forward(Mode::infer);
    auto pieces = [&](const std::vector<std::int32_t>& ids) {
      std::vector<std::string> v;
      for (auto id : ids) v.push_back(id == kBos ? "<s>" : id == kEos ? "</s>" : tok_->decode({id}));
      return v;
    };
    std::printf("\nattention of: %s -> %s\n", sentence.c_str(), tok_->decode(out).c_str());
    write_heatmaps(maps, dir, P.n_layer, programs_.config.heads, pieces(src), pieces(tgt_in));
  }

  Config c_;
  Context ctx_;
  bool copy_;
  const TransformerPrograms& programs_;
  std::unique_ptr<Executor<float>> model_;
  optim::Adam<float> opt_;
  int vocab_;  // the compiled variant's (P is its preset's)
  std::int64_t batch_, max_len_;
  std::uint64_t seed_;
  std::unique_ptr<data::SentencePieceTokenizer> tok_;
  std::vector<Example> train_, val_, test_, wesnoth_test_, copy_batch_;  // train_: the sentence pairs, then the phrases
  std::int64_t sentences_ = 0;
  std::size_t dropped_ = 0;  // game pairs sharing a side with the other split (data/en_de.hpp)
  mutable std::vector<std::int64_t> phrase_order_;
  std::vector<std::vector<std::int64_t>> epoch_;
  std::vector<std::int64_t> epoch_sizes_;  // batches per epoch, as far as computed
  std::uint64_t epoch_no_ = ~0ull;
};

Task transformer_task() {
  Task t;
  t.name = "transformer";
  t.summary = "encoder-decoder Transformer: EN->DE translation (BLEU), or the copy task";
  t.schema = transformer_schema();
  t.data_parallel = true;
  t.dependent_defaults = [](Config& c) {  // copy runs default to no dropout and no label smoothing
    if (c.text("task") != "copy") return;
    for (const char* k : {"dropout", "label_smoothing"})
      if (!c.was_set(k)) c.set(k, "0", "the copy task's default");
  };
  t.commands.push_back({"eval", "validation NLL, BLEU of greedy and beam search on the test split, heatmaps", eval_options()});
  t.commands.push_back({"translate", "translate English sentences (--text, or lines of standard input) with beam search", translate_options()});
  Schema exp;
  exp.integer("steps", 3000, {.min = 1, .max = 1 << 22}, "training steps to export").text("out", "transformer_batches.safetensors", "the file to write").flag("overwrite", false, "replace an existing --out file");
  t.commands.push_back({"export-batches", "the run's training batches (steps 1..N), validation batches and test sources, for another framework", exp});
  t.open = [](const Config& c, const Context& ctx) -> std::unique_ptr<Session> {
    if (c.text("task") == "copy") return std::make_unique<TransformerSession<models::kTransformerCopy, kTransformerOrderCopy>>(c, ctx);
#ifndef CTGRAD_SMOKE_PRESETS
    if (c.text("size") == "base") return std::make_unique<TransformerSession<models::kTransformerBase, kTransformerOrderBase>>(c, ctx);
    return std::make_unique<TransformerSession<models::kTransformerSmall, kTransformerOrderSmall>>(c, ctx);
#else
    preset_not_built("transformer", "task=" + c.text("task"));
#endif
  };
  return t;
}

const bool registered = register_task(transformer_task());

}  // namespace
}  // namespace ctgrad::cli
