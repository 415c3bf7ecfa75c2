// Writes what tests/models/parity.py checks against the PyTorch Transformer: a small model's
// weights after a few Adam steps, one padded batch (source and target padding), and ctgrad's fp32
// logits, label-smoothed loss and every parameter gradient on it.
#include <cstdio>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/transformer.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "parity_writer.hpp"

using namespace ctgrad;

constexpr models::TransformerConfig kParity{.vocab = 40, .n_layer = 2, .d_model = 32, .heads = 4, .d_ff = 64, .pad = 0};
static constexpr auto G = freeze<models::transformer, kParity>();

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: transformer_parity_writer out.safetensors\n");
    return 2;
  }
  constexpr std::int64_t B = 3, S = 7, T = 6;
  Program<G> model(Options{.threads = 2, .seed = 9, .hypers = {{"dropout", 0.0}, {"label_smoothing", 0.1}}});
  optim::Adam<float> opt(model.parameters(), optim::AdamOptions{.lr = 2e-3, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9});
  std::vector<std::int32_t> src(B * S), tgt_in(B * T), tgt_out(B * T), src_len{7, 4, 5}, tgt_len{6, 3, 5};
  auto batch = [&](std::uint64_t n) {
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t s = 0; s < S; ++s)
        src[std::size_t(b * S + s)] = s < src_len[std::size_t(b)] ? std::int32_t(1 + random::bits(random::key(n, 2, 0), std::uint64_t(b * S + s)) % 39) : 0;
      for (std::int64_t t = 0; t < T; ++t) {  // the target: the source reversed, after a start symbol 1
        const bool real = t < tgt_len[std::size_t(b)];
        tgt_in[std::size_t(b * T + t)] = !real ? 0 : t == 0 ? 1 : src[std::size_t(b * S + (src_len[std::size_t(b)] - t) % S)];
        tgt_out[std::size_t(b * T + t)] = real ? src[std::size_t(b * S + (src_len[std::size_t(b)] - 1 - t + S) % S)] : 0;
      }
    }
    model.set_input(models::transformer_inputs::src, std::span<const std::int32_t>(src), {B, S});
    model.set_input(models::transformer_inputs::src_len, std::span<const std::int32_t>(src_len), {B});
    model.set_input(models::transformer_inputs::tgt_in, std::span<const std::int32_t>(tgt_in), {B, T});
    model.set_input(models::transformer_inputs::tgt_len, std::span<const std::int32_t>(tgt_len), {B});
    model.set_input(models::transformer_inputs::tgt_out, std::span<const std::int32_t>(tgt_out), {B, T});
  };
  testing::train_then_forward(model, opt, batch, 20);
  testing::save_for_parity(argv[1], model,
                           {{"src", &src, {B, S}}, {"src_len", &src_len, {B}}, {"tgt_in", &tgt_in, {B, T}},
                            {"tgt_len", &tgt_len, {B}}, {"tgt_out", &tgt_out, {B, T}}},
                           "{\"vocab\": 40, \"n_layer\": 2, \"d_model\": 32, \"heads\": 4, \"d_ff\": 64, \"label_smoothing\": 0.1, \"pad\": 0}");
  std::printf("ctgrad loss %.6f after 20 Adam steps\n", double(model.loss()));
  return 0;
}
