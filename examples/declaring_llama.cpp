// Declaring a Llama: a whole modern decoder from ctgrad's layers, in one file, no custom op.
// Token embedding, then per layer a pre-norm residual attention (4 query heads over 2 key/value
// heads, rotary positions) and a SwiGLU feed-forward, RMSNorm throughout, no biases, an untied
// head. Trained for 150 steps on the KJV Bible, characters as tokens; prints the loss as it
// falls. `example_declaring_llama [steps]`. (models/llama.hpp is the same model with Hugging
// Face's parameter names and a decoding graph: `ctgrad train llama`.)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/optim/optimizers.hpp>

using namespace ctgrad;

constexpr int kVocab = 128, kDim = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kContext = 32;

namespace inputs {
constexpr InputName ids{"ids", DType::index};          // [Batch, Seq] tokens
constexpr InputName targets{"targets", DType::index};  // [Batch, Seq] the next token at each position
}  // namespace inputs

constexpr auto llama = [] {
  using namespace layers;
  Builder g;
  Value ids = g.input(inputs::ids, {Batch, Seq});
  Value targets = g.input(inputs::targets, {Batch, Seq});
  const NormOptions rms{.kind = NormKind::rms};
  const MultiHeadAttentionOptions attention{.heads = kHeads, .causal = true, .bias = false, .init = init::normal(0.02),
                                            .kv_heads = kKvHeads, .rope = RopeOptions{.theta = 10000}};
  const FeedForwardOptions mlp{.d_ff = gated_width(4 * kDim), .activation = Act::swiglu, .bias = false, .init = init::normal(0.02)};
  Value x = embedding(g.scope("embed"), ids, kVocab, kDim, {.init = init::normal(0.02)});  // [B, T, d]
  for (int l = 0; l < kLayers; ++l) {
    const Scope layer = g.scope("layers", l);
    x = x + multi_head_attention(layer.scope("attn"), {.q = norm(layer.scope("attn_norm"), x, rms)}, attention).out;
    x = x + feed_forward(layer.scope("mlp"), norm(layer.scope("mlp_norm"), x, rms), mlp);
  }
  Value logits = linear(g.scope("head"), norm(g.scope("norm"), x, rms), kVocab, {.bias = false});  // [B, T, vocab]
  g.loss(cross_entropy(logits, targets));
  return g;
};
static constexpr auto G = freeze<llama>();

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 150;
  const std::string text = data::kjv_text().substr(0, 1 << 20);  // the first MiB
  const auto tok = data::CharTokenizer::train(text);
  const std::vector<std::int32_t> tokens = tok.encode(text);
  data::LmBatches batches(tokens, kContext, 16, /*seed=*/1);
  Program<G> model(Options{.seed = 1});
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions{.lr = 3e-3, .weight_decay = 0.1}, {optim::no_decay_group()});
  std::printf("a Llama of %lld parameters, %d characters\n", (long long)model.parameter_count(), tok.vocab_size());
  double first = 0, last = 0;
  for (int step = 1; step <= steps; ++step) {
    batches.get(std::uint64_t(step));
    model.set_input(inputs::ids, std::span<const std::int32_t>(batches.x()), {16, kContext});
    model.set_input(inputs::targets, std::span<const std::int32_t>(batches.y()), {16, kContext});
    model.zero_grad();
    model.forward();
    model.backward();
    opt.step();
    (step == 1 ? first : last) = model.loss();
    if (step % 25 == 0 || step == 1) std::printf("step %4d  loss %.4f\n", step, double(model.loss()));
  }
  // Uniform guessing costs log(vocab) nats; the model must have learned well below it.
  const bool learned = std::isfinite(last) && last < first - 1.0;
  std::printf("%s: loss %.4f -> %.4f\n", learned ? "learned" : "did not learn", first, last);
  return learned ? 0 : 1;
}
