// Writes what tests/models/parity.py checks against the PyTorch reference model: a small GPT's
// weights after a few AdamW steps (so they are no longer at their initial scale), one batch, and
// ctgrad's fp32 logits, loss and every parameter gradient on that batch.
#include <cstdio>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/gpt.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "parity_writer.hpp"

using namespace ctgrad;

constexpr models::GptConfig kParity{.vocab = 64, .n_layer = 2, .n_head = 4, .d_model = 32, .context = 16};
static constexpr auto G = freeze<models::gpt, kParity>();

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gpt_parity_writer out.safetensors\n");
    return 2;
  }
  constexpr std::int64_t B = 3, T = 16;
  Program<G> model(Options{.threads = 2, .seed = 5});
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions{.lr = 3e-3, .weight_decay = 0.1}, {optim::no_decay_group()});
  std::vector<std::int32_t> ids(B * T), targets(B * T);
  auto batch = [&](std::uint64_t n) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ids[i] = std::int32_t(random::bits(random::key(n, 1, 0), i) % kParity.vocab);
      targets[i] = std::int32_t((ids[i] * 7 + 3) % kParity.vocab);  // a learnable map
    }
    model.set_input(models::gpt_inputs::ids, std::span<const std::int32_t>(ids), {B, T});
    model.set_input(models::gpt_inputs::targets, std::span<const std::int32_t>(targets), {B, T});
  };
  testing::train_then_forward(model, opt, batch);
  testing::save_for_parity(argv[1], model, {{"ids", &ids, {B, T}}, {"targets", &targets, {B, T}}},
                           "{\"vocab\": 64, \"n_layer\": 2, \"n_head\": 4, \"d_model\": 32, \"context\": 16}");
  std::printf("ctgrad loss %.6f after 30 AdamW steps\n", double(model.loss()));
  return 0;
}
