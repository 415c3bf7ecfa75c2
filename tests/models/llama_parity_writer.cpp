// Writes what tests/models/parity.py checks against the PyTorch Llama reference: a small Llama's
// weights after a few AdamW steps, one batch, and ctgrad's fp32 logits, loss and every parameter
// gradient. Two configurations: grouped-query (4 query heads over 2), half-split RoPE; and
// multi-query (over 1), GPT-J's interleaved RoPE, QK-norm and a sliding window of 5 (--mqa); and
// mixtures of experts, top-2 and top-1, with choices dropped over capacity (--moe, --moe-top1).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/models/llama.hpp>
#include <ctgrad/optim/optimizers.hpp>

#include "parity_writer.hpp"

using namespace ctgrad;

constexpr models::LlamaConfig kGqa{.vocab = 64, .n_layer = 2, .n_head = 4, .kv_heads = 2, .d_model = 32, .context = 16, .d_ff = 48};
constexpr models::LlamaConfig kMqa{.vocab = 64, .n_layer = 2, .n_head = 4, .kv_heads = 1, .d_model = 32, .context = 16, .d_ff = 48,
                                   .rope_theta = 500000, .rope_interleaved = true, .qk_norm = true, .window = 5};
// Mixtures of 4 experts, capacities small enough that choices are dropped (48 tokens: 12 rows per
// expert for the top-2 routing's 96 choices, 9 for the top-1's 48).
constexpr models::LlamaConfig kMoe2{.vocab = 64, .n_layer = 2, .n_head = 4, .kv_heads = 2, .d_model = 32, .context = 16, .d_ff = 24,
                                    .moe_experts = 4, .moe_top_k = 2, .moe_capacity = 0.5};
constexpr models::LlamaConfig kMoe1{.vocab = 64, .n_layer = 2, .n_head = 4, .kv_heads = 2, .d_model = 32, .context = 16, .d_ff = 24,
                                    .moe_experts = 4, .moe_top_k = 1, .moe_capacity = 0.75};

std::string config_json(const models::LlamaConfig& c) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  return "{\"vocab\": " + std::to_string(c.vocab) + ", \"n_layer\": " + std::to_string(c.n_layer) + ", \"n_head\": " + std::to_string(c.n_head) +
         ", \"kv_heads\": " + std::to_string(c.kv_heads) + ", \"d_model\": " + std::to_string(c.d_model) + ", \"d_ff\": " +
         std::to_string(c.d_ff) + ", \"rope_theta\": " + std::to_string(c.rope_theta) + ", \"rope_interleaved\": " + b(c.rope_interleaved) +
         ", \"qk_norm\": " + b(c.qk_norm) + ", \"window\": " + std::to_string(c.window) + ", \"bias\": " + b(c.bias) + ", \"tie\": " + b(c.tie) +
         ", \"moe_experts\": " + std::to_string(c.moe_experts) + ", \"moe_top_k\": " + std::to_string(c.moe_top_k) +
         ", \"moe_capacity\": " + std::to_string(c.moe_capacity) + ", \"moe_balance_weight\": 0.01, \"moe_z_weight\": 0.001, \"norm_eps\": 1e-5}";
}

template <models::LlamaConfig C>
int write(const char* path) {
  static constexpr auto G = freeze<models::llama, C>();
  constexpr std::int64_t B = 3, T = 16;
  Program<G> model(Options{.threads = 2, .seed = 5});
  optim::AdamW<float> opt(model.parameters(), optim::AdamOptions{.lr = 3e-3, .weight_decay = 0.1}, {optim::no_decay_group()});
  std::vector<std::int32_t> ids(B * T), targets(B * T);
  auto batch = [&](std::uint64_t n) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ids[i] = std::int32_t(random::bits(random::key(n, 1, 0), i) % C.vocab);
      targets[i] = std::int32_t((ids[i] * 7 + 3) % C.vocab);  // a learnable map
    }
    model.set_input(models::llama_inputs::ids, std::span<const std::int32_t>(ids), {B, T});
    model.set_input(models::llama_inputs::targets, std::span<const std::int32_t>(targets), {B, T});
  };
  testing::train_then_forward(model, opt, batch);
  testing::save_for_parity(path, model, {{"ids", &ids, {B, T}}, {"targets", &targets, {B, T}}}, config_json(C),
                           C.moe_experts ? std::vector<std::string>{"ce", "moe.balance", "moe.z", "moe.dropped"} : std::vector<std::string>{});
  std::printf("ctgrad loss %.6f after 30 AdamW steps\n", double(model.loss()));
  return 0;
}

int main(int argc, char** argv) {
  const std::string opt = argc == 3 ? argv[2] : "";
  if (argc < 2 || argc > 3 || (argc == 3 && opt != "--mqa" && opt != "--moe" && opt != "--moe-top1")) {
    std::fprintf(stderr, "usage: llama_parity_writer out.safetensors [--mqa | --moe | --moe-top1]\n");
    return 2;
  }
  if (opt == "--mqa") return write<kMqa>(argv[1]);
  if (opt == "--moe") return write<kMoe2>(argv[1]);
  if (opt == "--moe-top1") return write<kMoe1>(argv[1]);
  return write<kGqa>(argv[1]);
}
