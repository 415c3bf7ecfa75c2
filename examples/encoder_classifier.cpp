// An encoder-only Transformer (BERT's shape: token + learned position embeddings, post-norm
// blocks, the first token's vector classified) declared in a user's program, and trained with
// ctgrad's Trainer: validation, checkpoints, the log and plot, Ctrl-C and resuming come with it.
//
// The task, synthetic so that the example needs no data set: a sequence of 12 tokens from a
// vocabulary of 16, after a <cls> token 0; the label says whether token 1 occurs more often than
// token 2. Runs in a few seconds: `example_encoder_classifier [run folder]`.
#include <cstdio>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/training/trainer.hpp>

using namespace ctgrad;

constexpr int kVocab = 16, kLen = 13, kDim = 32, kLayers = 2, kClasses = 2;

// The model's inputs, named once.
namespace inputs {
constexpr InputName tokens{"tokens", DType::index};  // [Batch, Seq]
constexpr InputName labels{"labels", DType::index};  // [Batch]
}  // namespace inputs

constexpr auto encoder_classifier = [] {
  using namespace layers;
  Builder g;
  Value ids = g.input(inputs::tokens, {Batch, Seq});
  Value labels = g.input(inputs::labels, {Batch});
  const Real p = g.hyper("dropout", 0.1);  // a --set key in a command, set_hyper in a program
  Value x = add_learned_positions(g.scope("pos"), embedding(g.scope("tok"), ids, kVocab, kDim, {.init = init::normal(0.02)}), kLen);
  x = norm(g.scope("emb_norm"), dropout(x, p));
  const TransformerBlockOptions block{.attention = {.heads = 4, .dropout = p},
                                      .ffn = {.d_ff = 4 * kDim, .activation = Act::gelu},
                                      .placement = Norm::post,  // BERT's
                                      .dropout = p};
  for (int l = 0; l < kLayers; ++l) x = transformer_block(g.scope("layer", l), {.x = x}, block).x;
  Value cls = reshape(slice(x, 1, 0, 1), {Batch, kDim});  // the <cls> token's vector
  Value logits = linear(g.scope("classifier"), tanh(linear(g.scope("pooler"), cls, kDim)), kClasses);
  g.output(logits, "logits");
  g.loss(cross_entropy(logits, labels));
  return g;
};
static constexpr auto G = freeze<encoder_classifier>();

// Batch n of the synthetic task, the same whenever it is drawn.
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

int main(int argc, char** argv) {
  const std::int64_t batch = 32, steps = 400;
  Program<G> model({.threads = 2, .seed = 1});
  optim::AdamW<float> opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.01}, {optim::no_decay_group()});
  std::vector<std::int32_t> ids, labels, val_ids, val_labels;
  make_batch(1u << 30, 512, val_ids, val_labels);  // held out: batch numbers never trained on

  training::Run run{.model = model,
                 .optimizer = opt,
                 .feed =
                     [&](std::int64_t step) {
                       make_batch(std::uint64_t(step), batch, ids, labels);
                       model.set_input(inputs::tokens, std::span<const std::int32_t>(ids), {batch, kLen});
                       model.set_input(inputs::labels, std::span<const std::int32_t>(labels), {batch});
                       return double(batch);
                     },
                 .validate = [&] {
                   model.set_input(inputs::tokens, std::span<const std::int32_t>(val_ids), {512, kLen});
                   model.set_input(inputs::labels, std::span<const std::int32_t>(val_labels), {512});
                   model.forward(Mode::infer);
                   const auto logits = model.output("logits");
                   int right = 0;
                   for (int b = 0; b < 512; ++b) right += (logits[2 * b + 1] > logits[2 * b]) == (val_labels[std::size_t(b)] == 1);
                   return training::Metrics{{{"loss", double(model.loss())}, {"accuracy", right / 512.0}}};
                 }};
  const training::RunFolder folder(argc > 1 ? argv[1] : "runs/encoder_classifier");
  folder.start_new(/*overwrite=*/true);
  training::Trainer trainer(folder, {.steps = steps, .eval_every = 100, .clip = 1.0,
                                  .lr = optim::warmup_cosine(3e-3, 3e-4, 40, steps), .unit = "nats", .items = "seq"});
  const training::Outcome out = trainer.fit(run);
  const double accuracy = out.last_validation.values.at(1).second;
  std::printf("held-out accuracy %.3f after %lld steps (%.1f s of training); the majority class is %.3f\n", accuracy, (long long)out.last,
              out.seconds, [&] {
                int ones = 0;
                for (auto l : val_labels) ones += l;
                return std::max(ones, 512 - ones) / 512.0;
              }());
  return out.interrupted ? 130 : accuracy > 0.9 ? 0 : 1;
}
