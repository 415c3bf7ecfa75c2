// Writes what tests/models/parity.py checks against the PyTorch reference (bench/reference/bert.py):
// a small BERT's weights after a few AdamW steps of masked-token prediction, one batch with padding
// (rows of 12, 9 and 5 tokens in 12) and 7 picked positions, and ctgrad's fp32 logits, loss and
// every parameter gradient on that batch (dropout 0: the two libraries' random streams differ).
// With --next-sentence: the pretraining graph with next-sentence prediction (labels per row).
#include <cstdio>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/bert.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "parity_writer.hpp"

using namespace ctgrad;
namespace in = models::bert_inputs;

constexpr models::BertConfig kParity{.vocab = 50, .n_layer = 2, .heads = 4, .d_model = 32, .d_ff = 48, .context = 16};
static constexpr auto kMlm = freeze<models::bert_mlm, kParity>();
static constexpr auto kMlmNsp = freeze<models::bert_mlm, models::with_next_sentence(kParity)>();

template <const auto& G>
int write(const char* path, bool nsp) {
  constexpr std::int64_t B = 3, S = 12, P = 7;
  Program<G> model(Options{.threads = 2, .seed = 5, .hypers = {{"dropout", 0.0}}});
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions{.lr = 3e-3, .weight_decay = 0.01}, {optim::no_decay_group()});
  std::vector<std::int32_t> ids(B * S), segments(B * S), lengths{12, 9, 5}, picks(P), targets(P), labels(B);
  auto batch = [&](std::uint64_t n) {
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < S; ++t) {
        const std::size_t i = std::size_t(b * S + t);
        ids[i] = std::int32_t(random::bits(random::key(n, 1, 0), i) % kParity.vocab);
        segments[i] = t >= lengths[std::size_t(b)] / 2;  // sentence A, then B
      }
    for (std::int64_t k = 0; k < P; ++k) {  // picked positions inside each row's length
      const std::int64_t b = k % B, t = std::int64_t(random::bits(random::key(n, 2, 0), std::uint64_t(k)) % std::uint64_t(lengths[std::size_t(b)]));
      picks[std::size_t(k)] = std::int32_t(b * S + t);
      targets[std::size_t(k)] = ids[std::size_t(b * S + t)];
      ids[std::size_t(b * S + t)] = 4;  // the mask id
    }
    model.set_input(in::ids, std::span<const std::int32_t>(ids), {B, S});
    model.set_input(in::segments, std::span<const std::int32_t>(segments), {B, S});
    model.set_input(in::lengths, std::span<const std::int32_t>(lengths), {B});
    model.set_input(in::picks, std::span<const std::int32_t>(picks), {P});
    model.set_input(in::targets, std::span<const std::int32_t>(targets), {P});
    if (nsp) {
      for (std::int64_t b = 0; b < B; ++b) labels[std::size_t(b)] = std::int32_t(random::bits(random::key(n, 3, 0), std::uint64_t(b)) % 2);
      model.set_input(in::labels, std::span<const std::int32_t>(labels), {B});
    }
  };
  testing::train_then_forward(model, opt, batch);
  std::vector<testing::IntInput> inputs{
      {"ids", &ids, {B, S}}, {"segments", &segments, {B, S}}, {"lengths", &lengths, {B}}, {"picks", &picks, {P}}, {"targets", &targets, {P}}};
  if (nsp) inputs.push_back({"labels", &labels, {B}});
  testing::save_for_parity(path, model, inputs, "{\"vocab\": 50, \"n_layer\": 2, \"heads\": 4, \"d_model\": 32, \"d_ff\": 48, \"context\": 16}",
                           nsp ? std::vector<std::string>{"nsp_logits"} : std::vector<std::string>{});
  std::printf("ctgrad loss %.6f after 30 AdamW steps\n", double(model.loss()));
  return 0;
}

int main(int argc, char** argv) {
  const bool nsp = argc == 3 && std::string(argv[2]) == "--next-sentence";
  if (argc != 2 && !nsp) {
    std::fprintf(stderr, "usage: bert_parity_writer out.safetensors [--next-sentence]\n");
    return 2;
  }
  return nsp ? write<kMlmNsp>(argv[1], true) : write<kMlm>(argv[1], false);
}
