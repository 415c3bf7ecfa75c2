// The session of a decoder-only language model on the KJV Bible, shared by the model families
// (gpt, llama): tokenizer (characters or BPE), batches, validation, sampling with the key/value
// cache. A family is a small traits struct; see apps/tasks/gpt.cpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/hf_tokenizer.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/graph/program.hpp>
#include <ctgrad/models/sampling.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

#include <ctgrad/training/escape.hpp>

#include "../task.hpp"
#include "lm_data.hpp"

namespace ctgrad::cli {

// The input names every family's graphs use.
namespace lm_inputs {
inline constexpr InputName ids{"ids", DType::index};          // [Batch, Seq]
inline constexpr InputName targets{"targets", DType::index};  // [Batch, Seq]
}  // namespace lm_inputs

// The keys every family shares, after its preset key "size": the main job's recipe.
inline Schema lm_schema(Schema s) {
  s.choice("tokenizer", "char", {"char", "bpe", "unigram", "hf"},
           "characters, or SentencePiece BPE or unigram trained on the training split; hf: a Hugging Face tokenizer.json (--from)", Role::model)
      .integer("context", 64, {.min = 2, .max = 1 << 20}, "tokens per window (at most max_context; a longer one, max_context not given, grows the model with it)", Role::run)
      .integer("batch", 12, {.min = 1, .max = 1 << 16}, "windows per step", Role::run)
      .integer("steps", 2000, {.min = 1, .max = std::int64_t(1) << 40}, "training steps")
      .real("lr", 1e-3, {.min = 0, .max = 10, .min_open = true}, "peak learning rate (warm-up, then cosine)")
      .real("min_lr", 1e-4, {.min = 0, .max = 10}, "learning rate at the end of the cosine")
      .integer("warmup", 100, {.min = 0}, "warm-up steps")
      .real("beta2", 0.99, {.min = 0, .max = 1, .max_open = true}, "AdamW's beta2")
      .real("weight_decay", 0.1, {.min = 0, .max = 10}, "AdamW's decoupled decay (not on biases and norms)")
      .real("clip", 1.0, {.min = 0}, "global gradient-norm bound (0: none)")
      .integer("eval_every", 500, {.min = 1}, "steps between validations and checkpoints")
      .integer("eval_windows", 0, {.min = 0}, "validation windows (0: the whole validation split)")
      .integer("sample_tokens", 300, {.min = 0, .max = 1 << 20}, "tokens of the sample after training");
  add_lm_data_keys(s);
  return s;
}

inline Schema lm_sample_options() {
  Schema s;
  s.text("prompt", "And God said", "the text to continue")
      .integer("tokens", 200, {.min = 1, .max = 1 << 20}, "new tokens at most")
      .real("temperature", 0.8, {.min = 0, .max = 100}, "0: greedy")
      .integer("top-k", 0, {.min = 0}, "keep the k most likely tokens (0: all)")
      .real("top-p", 1.0, {.min = 0, .max = 1, .min_open = true}, "nucleus: the smallest set reaching p")
      .integer("seed", 1, {.min = 0}, "the sampling seed")
      .text("end", "", "stop after this token (one token of the tokenizer)")
      .flag("slide", false, "past the context, re-read its last half and go on (else stop)");
  return s;
}

// --from DIR (Task::from_hf) for a decoder-only family F: the keys its model sets (F::hf_keys),
// and the tokenizer the folder holds (tokenizer.json, Hugging Face's; or SentencePiece's
// tokenizer.model).
template <class F>
std::vector<std::pair<std::string, std::string>> lm_from_hf(const std::filesystem::path& dir, const pretrained::HfModel& m) {
  auto keys = F::hf_keys(m);
  std::error_code ec;
  if (std::filesystem::exists(dir / "tokenizer.json", ec)) keys.emplace_back("tokenizer", "hf");
  else if (std::filesystem::exists(dir / "tokenizer.model", ec)) keys.emplace_back("tokenizer", "bpe");
  else throw config_error("--from " + dir.string() + ": the folder holds no tokenizer.json (nor a SentencePiece tokenizer.model)");
  return keys;
}

// Task::to_hf for F: the model of a run's config as a Hugging Face folder's.
template <class F>
void lm_to_hf(const Config& c, const Context&, pretrained::HfModel& m) {
  m = pretrained::hf_model_of(F{}.model_config(c), {{"norm_eps", c.real("norm_eps")}, {"dropout", c.real("dropout")}});
}

// One tokenizer of either kind, saved beside the checkpoint.
struct AnyTokenizer {
  std::unique_ptr<data::Tokenizer> tok;
  std::string file;
};

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

// One session for every decoder-only language model family on the KJV text. F: the family
// (apps/tasks/gpt.cpp, llama.cpp): its model config from the command's config (F::model_config,
// any size and architecture), its training and decoding graphs as functions of it (F::train_graph,
// F::decoder_graph: frozen and planned at run time), its description and its sampler.
template <class F>
class LmSession : public Session {
 public:
  LmSession(const Config& c, const Context& ctx, F family = {})
      : family_(std::move(family)), c_(c), ctx_(ctx), config_(family_.model_config(c)), planned_(plan_model([&] { return family_.train_graph(config_); })),
        model_(std::make_unique<Program<run_time>>(planned_, program_options(c, ctx.threads, planned_->graph()))),
        opt_(model_->parameters(), optim::AdamOptions{.lr = c.real("lr"), .beta2 = c.real("beta2"), .weight_decay = c.real("weight_decay")},
             {optim::no_decay_group()}),
        context_(c.integer("context")), batch_(c.integer("batch")) {
    if (context_ > config_.context)
      throw config_error("context " + c.show("context") + " is longer than the model reads (max_context " + std::to_string(config_.context) + ")");
    check_fits(*model_, {batch_, context_, 1, 1, 1, 1}, 8.0 * double(batch_) * double(context_),
               "batch " + c.show("batch") + " x context " + c.show("context"));
    check_shards(ctx, batch_, "batch");
    for (const auto& h : model_->hypers())  // a variant's own hyperparameters (a mixture of experts' loss weights)
      if (c.schema().find(h.name)) model_->set_hyper(h.name, c.real(std::string(h.name)));
  }
  Executor<float>& model() override { return *model_; }
  optim::Optimizer<float>& optimizer() override { return opt_; }

  void prepare() override {
    const std::string kind = c_.text("tokenizer"), data = c_.text("data");
    const bool from_shards = is_shard_folder(data);
    LmText text;
    std::optional<ShardFolder> shards;
    if (from_shards) shards = open_shard_folder(data);
    else if (ctx_.command != "sample") text = read_lm_text(c_, ctx_.command == "train");
    else if (!ctx_.from_checkpoint && ctx_.pretrained.empty()) text = read_lm_text(c_, true);
    if (!ctx_.pretrained.empty()) {  // the model folder's tokenizer becomes the run's
      tok_.file = kind == "hf" ? "tokenizer.json" : "tokenizer.model";
      try {  // Hugging Face's tokenizer.json, or SentencePiece's model: each fault a one-line refusal
        if (kind == "hf") tok_.tok = std::make_unique<data::HfTokenizer>(data::HfTokenizer::load(ctx_.pretrained / tok_.file));
        else tok_.tok = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::load(ctx_.pretrained / tok_.file));
      } catch (const data::data_error& e) {
        throw config_error(message_of(e));
      }
      if (shards && data::file_xxh3(ctx_.pretrained / tok_.file) != shards->vocab_hash)
        throw config_error("data " + data + ": its shards were tokenized with another tokenizer than " + (ctx_.pretrained / tok_.file).string());
    } else if (ctx_.from_checkpoint) {
      tok_.file = kind == "char" || kind == "hf" ? "tokenizer.json" : "tokenizer.model";
      const auto path = ctx_.folder.file(tok_.file);
      if (!std::filesystem::exists(path)) throw config_error("the tokenizer " + path.string() + " is missing");
      tok_.tok = load_tokenizer(path);
      if (shards && data::file_xxh3(path) != shards->vocab_hash)
        throw config_error("data " + data + ": its shards were tokenized with another tokenizer than this run's " + path.string());
    } else if (kind == "hf") {
      throw config_error("tokenizer=hf is a Hugging Face model folder's tokenizer.json: give the folder with --from DIR");
    } else if (shards) {  // the folder's tokenizer becomes the run's
      tok_.file = shards->tokenizer.filename().string();
      if ((tok_.file == "tokenizer.json") != (kind == "char"))
        throw config_error("data " + data + " holds " + (kind == "char" ? "SentencePiece" : "character") + " tokens: --set tokenizer=" +
                           (kind == "char" ? "bpe" : "char"));
      tok_.tok = load_tokenizer(shards->tokenizer);
    } else {
      // The tokenizer learns from the training split (documents joined by line breaks).
      std::string joined;
      for (const std::string& d : text.train) joined += joined.empty() || joined.back() == '\n' ? d : "\n" + d;
      if (kind == "char") {
        tok_.tok = std::make_unique<data::CharTokenizer>(data::CharTokenizer::train(joined, data != "kjv"));  // a user's text may hold unseen characters
        tok_.file = "tokenizer.json";
      } else {  // SentencePiece writes <prefix>.model itself: under another name until the data is checked
        data::SentencePieceOptions so{.vocab_size = config_.vocab, .model_type = kind, .seed = data_seed(c_)};
        if (data != "kjv") so.input_sentence_size = 2'000'000, so.max_sentence_length = 1 << 16;  // a sample of a large corpus's lines, long ones too
        pending_.path = ctx_.folder.file(".tokenizer.pending.model");
        try {
          tok_.tok = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::train(joined, ctx_.folder.file(".tokenizer.pending"), so, ctx_.cache));
        } catch (const data::data_error& e) {  // too little text for the vocabulary: bad input
          throw config_error(message_of(e));
        }
        tok_.file = "tokenizer.model";
      }
    }
    vocab_ = tok_.tok->vocab_size();
    if (vocab_ > config_.vocab)
      throw config_error("the tokenizer has " + std::to_string(vocab_) + " tokens, more than the model's vocabulary of " + std::to_string(config_.vocab) +
                         " (vocab)");
    if (ctx_.command == "sample") return;
    const bool joined = c_.flag("span_documents");
    if (shards) {
      try {
        val_.shards = data::open_shards(shards->dir, "val", shards->vocab_hash);
        if (ctx_.command == "train") train_.shards = data::open_shards(shards->dir, "train", shards->vocab_hash);
      } catch (const data::data_error& e) {
        throw config_error(message_of(e));
      }
      if (val_.shards.empty()) throw config_error("data " + data + " has no validation shards (val_*.bin): tokenize it with a --val-fraction above 0");
      if (ctx_.command == "train" && train_.shards.empty()) throw config_error("data " + data + " has no training shards (train_*.bin)");
      for (const auto* split : {&val_.shards, &train_.shards})
        for (const auto& s : *split)
          if (s.header().vocab_size > std::uint32_t(vocab_)) throw config_error("token shard " + s.file().string() + " has ids past the tokenizer's vocabulary");
      if (val_.shards.size() != shards->val_shards || (ctx_.command == "train" && train_.shards.size() != shards->train_shards))
        throw config_error("data " + data + " holds " + std::to_string(train_.shards.size()) + " train and " + std::to_string(val_.shards.size()) +
                           " val shards; its tokenize.json counts " + std::to_string(shards->train_shards) + " and " + std::to_string(shards->val_shards) +
                           " (a shard is missing)");
      text.name = data, text.split = "validation shards";
    } else {
      val_ = encode_documents(*tok_.tok, std::move(text.validation), ctx_.cache, joined);
    }
    val_pieces_ = val_.pieces();
    val_windows_ = data::consecutive_windows(val_pieces_, context_, std::uint64_t(c_.integer("eval_windows")));
    windows_ = std::int64_t(val_windows_.size());
    if (windows_ == 0)
      throw config_error("the validation text of " + text.name + " holds no window of context " + c_.show("context") + " + 1 tokens" +
                         (joined ? "" : " within a document (span_documents=true joins them)"));
    if (ctx_.command != "train") return;
    if (!shards) train_ = encode_documents(*tok_.tok, std::move(text.train), ctx_.cache, joined);
    try {
      batches_.emplace(train_.pieces(), context_, batch_, data_seed(c_));
    } catch (const std::invalid_argument& e) {
      throw config_error("the training text of " + text.name + ": " + message_of(e) + (joined || shards ? "" : " (span_documents=true joins documents)"));
    }
    // The data is checked: the run's tokenizer is written (a refused start leaves none behind).
    if (!pending_.path.empty()) std::filesystem::rename(pending_.path, ctx_.folder.file(tok_.file)), pending_.path.clear();
    else if (!ctx_.from_checkpoint) tok_.tok->save(ctx_.folder.file(tok_.file));
    std::string title;  // "gpt: size small (6 layers, ...)"
    if constexpr (requires { family_.title(c_, config_); }) title = family_.title(c_, config_);
    else title = std::string(F::name) + ": size " + c_.text("size") + " (" + family_.describe(config_) + ")";
    std::printf("ctgrad train %s, %lld parameters, %d threads\n", title.c_str(), (long long)model_->parameter_count(), model_->threads());
    std::printf("%s: %llu train / %llu validation tokens%s, %s tokenizer with %d tokens; batch %lld x context %lld, %lld steps\n",
                data == "kjv" ? "KJV Bible" : training::printable(text.name).c_str(), (unsigned long long)train_.tokens(), (unsigned long long)val_.tokens(),
                data == "kjv" ? "" : (" (" + text.split + ")").c_str(), kind.c_str(), vocab_, (long long)batch_, (long long)context_,
                (long long)c_.integer("steps"));
  }

  checkpoint::Metadata metadata() override { return tokenizer_metadata(ctx_.folder, tok_.file); }

  std::vector<std::string> metrics() const override {
    std::vector<std::string> m{"loss"};
    for (const char* a : aux_outputs()) m.emplace_back(a);
    return m;
  }
  training::LoopOptions loop() override {
    return step_loop(c_, optim::warmup_cosine(c_.real("lr"), c_.real("min_lr"), c_.integer("warmup"), c_.integer("steps")), unit(), "tok");
  }

  training::Run run() override {
    return {.model = *model_,
            .optimizer = opt_,
            .feed =
                [this](std::int64_t step) {  // this rank's rows of the step's batch
                  batches_->get(std::uint64_t(step));
                  const std::int64_t first = ctx_.shard.begin(batch_) * context_, rows = ctx_.shard.rows(batch_);
                  const auto x = std::span<const std::int32_t>(batches_->x()), y = std::span<const std::int32_t>(batches_->y());
                  model_->set_input(lm_inputs::ids, x.subspan(std::size_t(first), std::size_t(rows * context_)), {rows, context_});
                  model_->set_input(lm_inputs::targets, y.subspan(std::size_t(first), std::size_t(rows * context_)), {rows, context_});
                  return double(rows * context_);
                },
            .validate = [this] { return validation_metrics(); }};
  }

  int after_training(const training::Outcome&) override {
    const std::int64_t n = c_.integer("sample_tokens");
    if (n <= 0) return 0;
    // The model writes on from a prompt (key/value cache; past the context it re-reads its last half).
    // The prompt: the KJV's "And God said", or the first tokens of the validation text.
    std::vector<std::int32_t> prompt;
    if (c_.text("data") == "kjv") prompt = tok_.tok->encode("And God said");
    else
      prompt.resize(std::size_t(std::min<std::int64_t>(16, context_ / 2 + 1))), val_pieces_[val_windows_[0].piece].read(val_windows_[0].start, prompt.size(), prompt.data());
    if (std::int64_t(prompt.size()) > context_) prompt.erase(prompt.begin(), prompt.end() - context_);  // a tiny context
    std::printf("sample (temperature 0.8, seed 1):\n%s", tok_.tok->decode(prompt).c_str());
    std::fflush(stdout);
    generate(prompt, models::SamplingOptions{.temperature = 0.8, .seed = 1, .max_tokens = int(n), .slide = true, .context = int(context_)});
    std::cout << "\n";
    return training::interrupted() ? 130 : 0;
  }

  int eval(const Config&) override {
    const Stopwatch time;
    const double v = validation_loss();
    if (training::interrupted()) return 130;
    if (!std::isfinite(v)) throw std::runtime_error("the validation loss is not finite: the checkpoint's model is broken");
    std::printf("validation loss %.4f %s (%lld windows of %lld tokens, %.1f s)\n", v, unit().c_str(), (long long)windows_, (long long)context_,
                time.seconds());
    return 0;
  }

  int command(const std::string&, const Config& o) override {  // sample
    models::SamplingOptions so{.temperature = o.real("temperature"),
                               .top_k = int(std::min<std::int64_t>(o.integer("top-k"), 1 << 30)),
                               .top_p = o.real("top-p"),
                               .seed = std::uint64_t(o.integer("seed")),
                               .max_tokens = int(o.integer("tokens")),
                               .slide = o.flag("slide"),
                               .context = int(context_)};
    // Text the tokenizer cannot encode is bad input (exit 2), named by its option.
    auto encode = [&](const std::string& option) {
      try {
        return tok_.tok->encode(o.text(option));
      } catch (const data::data_error& e) {
        const std::string m = e.what();
        throw config_error("--" + option + ": " + (m.rfind("ctgrad: ", 0) == 0 ? m.substr(8) : m));
      }
    };
    if (!o.text("end").empty()) {
      const auto e = encode("end");
      if (e.size() != 1) throw config_error("--end '" + o.text("end") + "' is " + std::to_string(e.size()) + " tokens, not one");
      so.end_token = e[0];
    }
    const std::string prompt = o.text("prompt");
    std::vector<std::int32_t> ids = encode("prompt");
    if (const auto* hf = dynamic_cast<const data::HfTokenizer*>(tok_.tok.get()))  // a prompt begins as the model's texts did (Llama's <s>)
      ids.insert(ids.begin(), hf->special_prefix().begin(), hf->special_prefix().end());
    if (ids.empty()) throw config_error("the prompt is empty");
    if (std::int64_t(ids.size()) > context_)
      throw config_error("the prompt is " + std::to_string(ids.size()) + " tokens, longer than the context of " + std::to_string(context_) +
                         " the model was trained with");
    std::cout << prompt << std::flush;
    const std::size_t made = generate(ids, so);
    std::cout << "\n";
    if (ids.size() + made > std::size_t(context_) && !so.slide && made < std::size_t(so.max_tokens))
      std::cerr << "ctgrad: stopped at the context limit of " << context_ << " tokens (--slide goes on)\n";
    return training::interrupted() ? 130 : 0;
  }

 private:
  std::string unit() const { return c_.text("tokenizer") == "char" ? "nats/char" : "nats/token"; }

  // Validation: the split cut into consecutive windows of `context` tokens (all of them, or the
  // first eval_windows), every position scored once. Same definition as bench/reference/train_gpt.py.
  // A model with auxiliary loss terms (a mixture of experts) reports its cross-entropy "ce" as the
  // loss, and the terms beside it (means over the windows' batches, weighted by their rows).
  std::vector<const char*> aux_outputs() const {
    if constexpr (requires { family_.aux_outputs(config_); }) return family_.aux_outputs(config_);
    return {};
  }
  double validation_loss() { return validation_metrics().loss(); }
  training::Metrics validation_metrics() {
    const std::vector<const char*> aux = aux_outputs();
    std::vector<std::int32_t> vx(std::size_t(batch_ * context_)), vy(vx.size()), window(std::size_t(context_ + 1));
    std::vector<double> total(1 + aux.size(), 0.0);
    const EvalShard shard{ctx_.comm};
    for (std::int64_t w0 = 0; w0 < windows_ && !training::interrupted(); w0 += batch_) {
      if (!shard.mine(w0 / batch_)) continue;
      const std::int64_t n = std::min(batch_, windows_ - w0);
      for (std::int64_t b = 0; b < n; ++b) {
        const data::Window& w = val_windows_[std::size_t(w0 + b)];
        val_pieces_[w.piece].read(w.start, window.size(), window.data());
        std::copy(window.begin(), window.end() - 1, vx.begin() + b * context_);
        std::copy(window.begin() + 1, window.end(), vy.begin() + b * context_);
      }
      model_->set_input(lm_inputs::ids, std::span<const std::int32_t>(vx).first(std::size_t(n * context_)), {n, context_});
      model_->set_input(lm_inputs::targets, std::span<const std::int32_t>(vy).first(std::size_t(n * context_)), {n, context_});
      model_->forward(Mode::infer);
      total[0] += double(aux.empty() ? model_->loss() : model_->output("ce")[0]) * double(n);
      for (std::size_t i = 0; i < aux.size(); ++i) total[i + 1] += double(model_->output(aux[i])[0]) * double(n);
    }
    shard.sum(total);
    training::Metrics m{{{"loss", total[0] / double(windows_)}}};
    for (std::size_t i = 0; i < aux.size(); ++i) m.values.emplace_back(aux[i], total[i + 1] / double(windows_));
    return m;
  }

  // Generates from a prompt, printing as it goes; returns the tokens made. Ctrl-C stops it.
  std::size_t generate(std::vector<std::int32_t> ids, const models::SamplingOptions& so) {
    models::check(so);
    const std::size_t start = ids.size();
    auto decoder = plan_model([&] { return family_.decoder_graph(config_); });
    typename F::Sampler gen(std::make_unique<Program<run_time>>(decoder, program_options(c_, ctx_.threads, decoder->graph())), config_,
                            model_->parameters());  // the run's hyperparameters (norm_eps) too
    TextStream out(*tok_.tok, ids);
    gen.generate(ids, vocab_, so, [&](std::int32_t id) {
      out(id);
      return !training::interrupted();
    });
    return ids.size() - start;
  }

  F family_;
  Config c_;
  Context ctx_;
  typename F::ModelConfig config_;
  std::shared_ptr<const PlannedGraph> planned_;
  std::unique_ptr<Executor<float>> model_;
  optim::AdamW<float> opt_;
  std::int64_t context_, batch_, windows_ = 0;
  AnyTokenizer tok_;
  std::int32_t vocab_ = 0;
  struct PendingFile {  // removed unless it was renamed into place
    std::filesystem::path path;
    ~PendingFile() {
      std::error_code ec;
      if (!path.empty()) std::filesystem::remove(path, ec);
    }
  } pending_;
  TokenSplit train_, val_;
  std::vector<data::TokenPiece> val_pieces_;
  std::vector<data::Window> val_windows_;
  std::optional<data::LmBatches> batches_;
};

}  // namespace ctgrad::cli
