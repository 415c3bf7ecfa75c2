// Writes what tests/models/parity.py checks against d2l's Bahdanau encoder-decoder in PyTorch
// (bench/reference/seq2seq.py): a small model's weights after a few AdamW steps, one padded batch,
// and ctgrad's fp32 logits, attention weights, loss and every parameter gradient.
#include <cstdio>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/seq2seq.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "parity_writer.hpp"

using namespace ctgrad;
namespace in = models::seq2seq_inputs;

constexpr models::Seq2SeqConfig kConfig{.vocab = 30, .embed = 8, .hidden = 12, .layers = 2};
static constexpr auto G = freeze<models::seq2seq, kConfig>();

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: seq2seq_parity_writer out.safetensors\n");
    return 2;
  }
  constexpr std::int64_t B = 4, S = 7, T = 6;
  const std::int32_t src_lens[B] = {7, 3, 5, 1}, tgt_lens[B] = {6, 6, 2, 4};
  Program<G> model(Options{.threads = 2, .seed = 5, .hypers = {{"dropout", 0.0}}});
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions{.lr = 3e-3, .weight_decay = 0.1}, {optim::no_decay_group()});
  std::vector<std::int32_t> src(B * S), src_len(src_lens, src_lens + B), tgt_in(B * T), tgt_len(tgt_lens, tgt_lens + B), tgt_out(B * T);
  auto batch = [&](std::uint64_t n) {
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t s = 0; s < S; ++s)
        src[std::size_t(b * S + s)] = s < src_lens[b] ? std::int32_t(4 + random::bits(random::key(n, 1, 0), std::uint64_t(b * S + s)) % (kConfig.vocab - 4)) : 0;
      for (std::int64_t t = 0; t < T; ++t) {
        const bool live = t < tgt_lens[b];
        // A learnable map: target t is a function of source token t (or of the last one).
        const std::int32_t y = std::int32_t(4 + (src[std::size_t(b * S + std::min<std::int64_t>(t, src_lens[b] - 1))] * 7 + 3) % (kConfig.vocab - 4));
        tgt_out[std::size_t(b * T + t)] = live ? y : 0;
        tgt_in[std::size_t(b * T + t)] = !live ? 0 : t == 0 ? 2 : tgt_out[std::size_t(b * T + t - 1)];
      }
    }
    model.set_input(in::src, std::span<const std::int32_t>(src), {B, S});
    model.set_input(in::src_len, std::span<const std::int32_t>(src_len), {B});
    model.set_input(in::tgt_in, std::span<const std::int32_t>(tgt_in), {B, T});
    model.set_input(in::tgt_len, std::span<const std::int32_t>(tgt_len), {B});
    model.set_input(in::tgt_out, std::span<const std::int32_t>(tgt_out), {B, T});
  };
  testing::train_then_forward(model, opt, batch);
  const std::string config = "{\"vocab\": " + std::to_string(kConfig.vocab) + ", \"embed\": " + std::to_string(kConfig.embed) + ", \"hidden\": " +
                             std::to_string(kConfig.hidden) + ", \"layers\": " + std::to_string(kConfig.layers) + "}";
  testing::save_for_parity(argv[1], model,
                           {{"src", &src, {B, S}}, {"src_len", &src_len, {B}}, {"tgt_in", &tgt_in, {B, T}}, {"tgt_len", &tgt_len, {B}}, {"tgt_out", &tgt_out, {B, T}}},
                           config, {"attention"});
  std::printf("ctgrad loss %.6f after 30 AdamW steps\n", double(model.loss()));
  return 0;
}
