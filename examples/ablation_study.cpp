// An ablation study of a user's own model, from a user's own program: two architecture keys of
// its own (where the blocks normalise, and how the sequence is pooled), each combination a graph
// frozen at compile time, crossed with a learning rate, 2 seeds each; ctgrad's Study runs them (resumable: run it again
// and the finished runs are skipped) and writes the report (results.md/.csv/.json/.html, plots).
//
// The task is the synthetic one of examples/encoder_classifier.cpp: does token 1 occur more often
// than token 2 in a sequence of 12? Runs in seconds: `example_ablation_study [study folder]`.
#include <cstdio>
#include <memory>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/training/ablation.hpp>
#include <ctgrad/training/trainer.hpp>

using namespace ctgrad;

constexpr int kVocab = 16, kLen = 13, kDim = 32, kClasses = 2;

namespace inputs {
constexpr InputName tokens{"tokens", DType::index};  // [Batch, Seq]
constexpr InputName labels{"labels", DType::index};  // [Batch]
}  // namespace inputs

// The architecture: what the study's two keys change.
struct Arch {
  layers::Norm norm = layers::Norm::post;
  bool mean_pool = false;
};

constexpr Builder classifier(const Arch& A) {
  using namespace layers;
  Builder g;
  Value ids = g.input(inputs::tokens, {Batch, Seq});
  Value labels = g.input(inputs::labels, {Batch});
  Value x = add_learned_positions(g.scope("pos"), embedding(g.scope("tok"), ids, kVocab, kDim, {.init = init::normal(0.02)}), kLen);
  const TransformerBlockOptions block{.attention = {.heads = 4}, .ffn = {.d_ff = 4 * kDim, .activation = Act::gelu}, .placement = A.norm};
  for (int l = 0; l < 2; ++l) x = transformer_block(g.scope("layer", l), {.x = x}, block).x;
  if (A.norm == Norm::pre) x = norm(g.scope("final_norm"), x);
  Value pooled = A.mean_pool ? mean(x, 1) : reshape(slice(x, 1, 0, 1), {Batch, kDim});
  Value logits = linear(g.scope("classifier"), pooled, kClasses);
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, labels));
  return g;
}

// One graph per combination, frozen at compile time (its shapes checked by the compiler).
template <Arch A>
std::unique_ptr<Executor<float>> make(const Options& o) {
  static constexpr auto g = freeze<classifier, A>();
  return std::make_unique<Program<g>>(o);
}
std::unique_ptr<Executor<float>> make_model(const Arch& a, const Options& o) {
  using layers::Norm;
  if (a.norm == Norm::post) return a.mean_pool ? make<Arch{Norm::post, true}>(o) : make<Arch{Norm::post, false}>(o);
  return a.mean_pool ? make<Arch{Norm::pre, true}>(o) : make<Arch{Norm::pre, false}>(o);
}

void make_batch(std::uint64_t n, std::int64_t batch, std::vector<std::int32_t>& ids, std::vector<std::int32_t>& labels) {
  ids.assign(std::size_t(batch * kLen), 0);
  labels.assign(std::size_t(batch), 0);
  for (std::int64_t b = 0; b < batch; ++b) {
    int ones = 0, twos = 0;
    for (int t = 1; t < kLen; ++t) {
      const auto tok = std::int32_t(1 + random::bits(random::key(n, std::uint64_t(b), 5), std::uint64_t(t)) % (kVocab - 1));
      ids[std::size_t(b * kLen + t)] = tok;
      ones += tok == 1, twos += tok == 2;
    }
    labels[std::size_t(b)] = ones > twos;
  }
}

// One run of the study: its settings (the grid's values), its seed, its folder.
int train(const training::ablation::RunSpec& r, const training::ablation::RunContext& ctx) {
  const Arch arch{.norm = layers::parse_norm(r.value("norm")), .mean_pool = r.value("pool") == "mean"};
  const double lr = std::stod(r.value("lr"));
  const std::unique_ptr<Executor<float>> model = make_model(arch, {.threads = ctx.threads, .seed = std::uint64_t(r.seed)});
  optim::AdamW<float> opt(model->parameters(), {.lr = lr, .weight_decay = 0.01}, {optim::no_decay_group()});
  const std::int64_t batch = 32, steps = 60;
  std::vector<std::int32_t> ids, labels, val_ids, val_labels;
  make_batch(1u << 30, 512, val_ids, val_labels);
  training::Run run{.model = *model,
                    .optimizer = opt,
                    .feed =
                        [&](std::int64_t step) {  // the seed orders the data too: runs of one seed see the same batches
                          make_batch(std::uint64_t(step) * 1000 + std::uint64_t(r.seed), batch, ids, labels);
                          model->set_input(inputs::tokens, std::span<const std::int32_t>(ids), {batch, kLen});
                          model->set_input(inputs::labels, std::span<const std::int32_t>(labels), {batch});
                          return double(batch);
                        },
                    .validate = [&] {
                      model->set_input(inputs::tokens, std::span<const std::int32_t>(val_ids), {512, kLen});
                      model->set_input(inputs::labels, std::span<const std::int32_t>(val_labels), {512});
                      model->forward(Mode::infer);
                      const auto logits = model->output("logits");
                      int right = 0;
                      for (int b = 0; b < 512; ++b) right += (logits[2 * b + 1] > logits[2 * b]) == (val_labels[std::size_t(b)] == 1);
                      return training::Metrics{{{"loss", double(model->loss())}, {"accuracy", right / 512.0}}};
                    }};
  const training::RunFolder folder(r.dir);
  if (!ctx.resume) folder.start_new(/*overwrite=*/true);
  training::ablation::record_parameters(r.dir, model->parameter_count());
  training::Trainer trainer(folder, {.steps = steps, .eval_every = 20, .clip = 1.0, .lr = optim::warmup_cosine(lr, lr / 10, 10, steps),
                                     .unit = "nats", .items = "seq"});
  if (ctx.resume) trainer.load(run);
  const training::Outcome out = trainer.fit(run);
  return out.interrupted ? 130 : out.diverged ? 3 : 0;
}

int main(int argc, char** argv) {
  training::ablation::Study study({.name = "encoder classifier: norm x pooling x lr",
                                   .grid = {{"norm", {"post", "pre"}}, {"pool", {"cls", "mean"}}, {"lr", {"3e-3", "1e-3"}}},
                                   .seeds = 2,
                                   .dir = argc > 1 ? argv[1] : "studies/encoder_classifier",
                                   .jobs = 1,
                                   .metric = "accuracy"});
  const int failed = study.run(train);
  study.report();
  for (const auto& s : study.summarize())
    std::printf("%-28s accuracy %.3f ± %.3f   vs baseline %+.3f\n", s.config.c_str(), s.mean, s.sd, s.diff);
  return failed ? 1 : 0;
}
