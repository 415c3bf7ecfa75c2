// Writes what tests/models/parity.py checks against the PyTorch reference (bench/reference/t5.py):
// a small T5's weights after a few AdamW steps of span filling, one padded batch (sources of 12, 9
// and 5 tokens in 12, targets of 10, 7 and 4 in 10, pad ignored), ctgrad's fp32 logits, loss and
// every parameter gradient on it, and the relative-position bucket of every distance -300..300
// (both directions, T5's 32 buckets to distance 128) for the reference's bucket function. With
// --tied: T5 v1.0's output (the shared embedding, the decoder output scaled by d^-1/2).
#include <cstdio>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/t5.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "parity_writer.hpp"

using namespace ctgrad;
namespace in = models::t5_inputs;

// 8 buckets to distance 10: sequences of 12 reach the logarithmic buckets.
constexpr models::T5Config kParity{.vocab = 50, .n_layer = 2, .n_dec_layer = 2, .d_model = 32, .heads = 4, .d_ff = 48, .buckets = 8, .max_distance = 10};
static constexpr auto kGraph = freeze<models::t5, kParity>();
static constexpr auto kTied = freeze<models::t5, models::with_tied_embeddings(kParity)>();

template <const auto& G>
int write(const char* path, bool tied) {
  constexpr std::int64_t B = 3, S = 12, T = 10;
  Program<G> model(Options{.threads = 2, .seed = 5, .hypers = {{"dropout", 0.0}, {"label_smoothing", 0.1}}});
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions{.lr = 3e-3, .weight_decay = 0.01}, {optim::no_decay_group()});
  std::vector<std::int32_t> src(B * S), src_len{12, 9, 5}, tgt_in(B * T), tgt_out(B * T);
  const std::vector<std::int32_t> tgt_len{10, 7, 4};
  auto batch = [&](std::uint64_t n) {
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t s = 0; s < S; ++s)
        src[std::size_t(b * S + s)] = s < src_len[std::size_t(b)] ? 1 + std::int32_t(random::bits(random::key(n, 1, 0), std::uint64_t(b * S + s)) % 49) : 0;
      for (std::int64_t t = 0; t < T; ++t) {
        const bool real = t < tgt_len[std::size_t(b)];
        tgt_out[std::size_t(b * T + t)] = real ? 1 + std::int32_t(random::bits(random::key(n, 2, 0), std::uint64_t(b * T + t)) % 49) : 0;
        tgt_in[std::size_t(b * T + t)] = t == 0 ? 0 : tgt_out[std::size_t(b * T + t - 1)];
      }
    }
    model.set_input(in::src, std::span<const std::int32_t>(src), {B, S});
    model.set_input(in::src_len, std::span<const std::int32_t>(src_len), {B});
    model.set_input(in::tgt_in, std::span<const std::int32_t>(tgt_in), {B, T});
    model.set_input(in::tgt_out, std::span<const std::int32_t>(tgt_out), {B, T});
  };
  testing::train_then_forward(model, opt, batch);
  std::vector<std::int32_t> distances, bidirectional, causal;
  for (std::int32_t r = -300; r <= 300; ++r) {
    distances.push_back(r);
    bidirectional.push_back(relative_position_bucket(r, true, 32, 128));
    causal.push_back(relative_position_bucket(r, false, 32, 128));
  }
  const std::int64_t n = std::int64_t(distances.size());
  testing::save_for_parity(path, model,
                           {{"src", &src, {B, S}}, {"src_len", &src_len, {B}}, {"tgt_in", &tgt_in, {B, T}}, {"tgt_out", &tgt_out, {B, T}},
                            {"distances", &distances, {n}}, {"buckets_bidirectional", &bidirectional, {n}}, {"buckets_causal", &causal, {n}}},
                           "{\"vocab\": 50, \"n_layer\": 2, \"n_dec_layer\": 2, \"d_model\": 32, \"heads\": 4, \"d_ff\": 48, \"buckets\": 8, "
                           "\"max_distance\": 10, \"label_smoothing\": 0.1, \"tied\": " + std::string(tied ? "true" : "false") + "}");
  std::printf("ctgrad loss %.6f after 30 AdamW steps\n", double(model.loss()));
  return 0;
}

int main(int argc, char** argv) {
  const bool tied = argc == 3 && std::string(argv[2]) == "--tied";
  if (argc != 2 && !tied) {
    std::fprintf(stderr, "usage: t5_parity_writer out.safetensors [--tied]\n");
    return 2;
  }
  return tied ? write<kTied>(argv[1], true) : write<kGraph>(argv[1], false);
}
