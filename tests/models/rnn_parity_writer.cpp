// Writes what tests/models/parity.py checks against PyTorch's nn.GRU / nn.LSTM (bench/reference/
// rnn.py): an embedding, a 2-layer bidirectional GRU (or LSTM, --lstm) over a padded batch and a
// linear head, after a few AdamW steps; ctgrad's fp32 logits, loss, final states and every
// parameter gradient.
#include <cstdio>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "parity_writer.hpp"

using namespace ctgrad;

constexpr int kVocab = 20, kD = 8, kHidden = 12, kLayers = 2;

template <bool kLstm>
constexpr Builder tagger() {
  Builder g;
  Value ids = g.input("ids", {Batch, Seq}, {.dtype = DType::index});
  Value mask = g.input("mask", {Batch, Seq}, {.dtype = DType::index});
  Value targets = g.input("targets", {Batch, Seq}, {.dtype = DType::index});
  Value x = layers::embedding(g.scope("embed"), ids, kVocab, kD);
  const layers::RecurrentOptions o{.hidden = kHidden, .layers = kLayers, .bidirectional = true};
  layers::RecurrentResult r;
  if constexpr (kLstm) r = layers::lstm(g.scope("rnn"), {.x = x, .mask = mask}, o);
  else r = layers::gru(g.scope("rnn"), {.x = x, .mask = mask}, o);
  Value logits = layers::linear(g.scope("head"), r.out, kVocab);
  g.output(logits, "logits");
  for (std::size_t k = 0; k < r.h.size(); ++k) {
    g.output(r.h[k], "h." + Scope::digits(int(k)));
    if (kLstm) g.output(r.c[k], "c." + Scope::digits(int(k)));
  }
  g.loss(cross_entropy(logits, targets));
  return g;
}
constexpr auto gru_tagger = [] { return tagger<false>(); };
constexpr auto lstm_tagger = [] { return tagger<true>(); };

template <const auto& G, bool kLstm>
int write(const char* path) {
  constexpr std::int64_t B = 4, T = 9;
  const std::int64_t lengths[B] = {9, 6, 2, 8};
  Program<G> model(Options{.threads = 2, .seed = 5});
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions{.lr = 3e-3, .weight_decay = 0.1}, {optim::no_decay_group()});
  std::vector<std::int32_t> ids(B * T), mask(B * T), targets(B * T);
  auto batch = [&](std::uint64_t n) {
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < T; ++t) {
        const auto i = std::size_t(b * T + t);
        ids[i] = std::int32_t(random::bits(random::key(n, 1, 0), i) % kVocab);
        mask[i] = t < lengths[b];
        targets[i] = mask[i] ? std::int32_t((ids[i] * 7 + 3) % kVocab) : -100;
      }
    model.set_input("ids", std::span<const std::int32_t>(ids), {B, T});
    model.set_input("mask", std::span<const std::int32_t>(mask), {B, T});
    model.set_input("targets", std::span<const std::int32_t>(targets), {B, T});
  };
  testing::train_then_forward(model, opt, batch);
  std::vector<std::string> states;
  for (int k = 0; k < 2 * kLayers; ++k) {
    states.push_back("h." + std::to_string(k));
    if (kLstm) states.push_back("c." + std::to_string(k));
  }
  const std::string config = std::string("{\"kind\": \"") + (kLstm ? "lstm" : "gru") + "\", \"vocab\": " + std::to_string(kVocab) +
                             ", \"d\": " + std::to_string(kD) + ", \"hidden\": " + std::to_string(kHidden) + ", \"layers\": " +
                             std::to_string(kLayers) + ", \"bidirectional\": true}";
  testing::save_for_parity(path, model, {{"ids", &ids, {B, T}}, {"mask", &mask, {B, T}}, {"targets", &targets, {B, T}}}, config, states);
  std::printf("ctgrad loss %.6f after 30 AdamW steps\n", double(model.loss()));
  return 0;
}

static constexpr auto GruG = freeze<gru_tagger>();
static constexpr auto LstmG = freeze<lstm_tagger>();

int main(int argc, char** argv) {
  const std::string opt = argc == 3 ? argv[2] : "";
  if (argc < 2 || argc > 3 || (argc == 3 && opt != "--lstm")) {
    std::fprintf(stderr, "usage: rnn_parity_writer out.safetensors [--lstm]\n");
    return 2;
  }
  return opt == "--lstm" ? write<LstmG, true>(argv[1]) : write<GruG, false>(argv[1]);
}
