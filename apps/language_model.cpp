// A user's decoder-only language model in the command (cli.hpp): the LM session every family shares
// (tasks/lm_session.hpp), with the model's graph from its logits function, and a sampler that
// recomputes the window for each new token.
#include "cli.hpp"

#include <ctgrad/models/decoding.hpp>
#include <ctgrad/models/sampling.hpp>
#include <ctgrad/ops/loss.hpp>

#include "tasks/lm_session.hpp"

namespace ctgrad::cli {

namespace {

struct UserModelConfig {
  std::shared_ptr<const LanguageModel> model;
  Config config;
  int vocab = 0, context = 0;
};

// Sampling without a key/value cache: each new token is one forward pass over the window so far.
class WindowSampler {
 public:
  WindowSampler(std::unique_ptr<Executor<float>> decoder, const UserModelConfig& c, std::span<const Parameter<float>> weights)
      : prog_(std::move(decoder)), vocab_(c.vocab), context_(c.context) {
    models::copy_weights(weights, *prog_, c.model->name.c_str());
  }
  template <class OnToken>
  void generate(std::vector<std::int32_t>& tokens, std::int32_t n_valid, const models::SamplingOptions& o, OnToken on_token) {
    models::check(o);
    const std::size_t limit = std::size_t(o.context > 0 ? std::min(o.context, context_) : context_);
    std::vector<std::pair<double, std::int32_t>> work;
    std::size_t base = tokens.size() > limit ? tokens.size() - limit : 0;
    for (int made = 0; made < o.max_tokens; ++made) {
      if (tokens.size() - base > limit) {
        if (!o.slide) return;
        base = tokens.size() - limit / 2;
      }
      const auto window = std::span<const std::int32_t>(tokens).subspan(base);
      prog_->set_input("ids", window, {1, std::int64_t(window.size())});
      prog_->forward(Mode::infer);
      const auto logits = prog_->output("logits");  // [1, T, vocab]: the last row predicts
      const std::int32_t next = models::sample_token({logits.data + (logits.numel - vocab_), std::size_t(vocab_)}, n_valid, o, std::uint64_t(made), work);
      tokens.push_back(next);
      if (!on_token(next) || next == o.end_token) return;
    }
  }

 private:
  std::unique_ptr<Executor<float>> prog_;
  int vocab_, context_;
};

struct UserFamily {
  using ModelConfig = UserModelConfig;
  using Sampler = WindowSampler;
  std::shared_ptr<const LanguageModel> model;

  ModelConfig model_config(const Config& c) const {
    return {model, c, size_or(c, "vocab", model->vocab), size_or(c, "max_context", model->max_context)};
  }
  // ids -> the model's logits -> next-token cross entropy.
  static Builder train_graph(const ModelConfig& m) {
    Builder g;
    Value ids = g.input(lm_inputs::ids, {Batch, Seq});
    Value targets = g.input(lm_inputs::targets, {Batch, Seq});
    Value logits = m.model->logits(g, ids, m.config, m.vocab, m.context);
    g.output(logits, "logits");
    g.loss(cross_entropy(logits, targets));
    return g;
  }
  static Builder decoder_graph(const ModelConfig& m) {
    Builder g;
    Value ids = g.input(lm_inputs::ids, {Batch, Seq});
    g.output(m.model->logits(g, ids, m.config, m.vocab, m.context), "logits");
    return g;
  }
  std::string title(const Config&, const ModelConfig& m) const {
    return m.model->name + " (vocabulary " + std::to_string(m.vocab) + ", max_context " + std::to_string(m.context) + ")";
  }
};

}  // namespace

Task language_model(LanguageModel m) {
  if (m.name.empty() || !m.logits) throw std::invalid_argument("ctgrad: a LanguageModel needs a name and a logits function");
  auto model = std::make_shared<const LanguageModel>(std::move(m));
  Task t;
  t.name = model->name;
  t.summary = model->summary.empty() ? "a decoder-only language model of this program" : model->summary;
  Schema s = lm_schema(Schema{});
  s.integer("vocab", 0, {.min = 0, .max = 1 << 20}, "architecture: the vocabulary, at least the tokenizer's (0: " + std::to_string(model->vocab) + ")", Role::model)
      .integer("max_context", 0, {.min = 0, .max = 1 << 20}, "architecture: the longest context the model reads (0: " + std::to_string(model->max_context) + ")",
               Role::model);
  if (model->keys) model->keys(s);
  add_common_keys(s);
  t.schema = std::move(s);
  t.data_parallel = true;
  t.commands.push_back({"sample", "continue a prompt with the trained model", lm_sample_options()});
  t.dependent_defaults = with_shard_tokenizer(fit_context_to_model([model](const Config&) { return model->max_context; }));
  t.open = [model](const Config& c, const Context& ctx) -> std::unique_ptr<Session> {
    return std::make_unique<LmSession<UserFamily>>(c, ctx, UserFamily{model});
  };
  t.check_against_checkpoint = refuse_longer_context;
  t.input_folders = {"data", "val_data"};
  return t;
}

}  // namespace ctgrad::cli
