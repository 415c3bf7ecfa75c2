// ctgrad train|eval|sample llama: a Llama-style model (models/llama.hpp) on the GPT main job's data
// and recipe (the KJV Bible, characters or BPE; lm_session.hpp), its checkpoints in Hugging Face
// Llama's names (docs/models/llama.md).
#include <ctgrad/models/llama.hpp>

#include "../variants/llama.hpp"
#include "lm_session.hpp"

namespace ctgrad::cli {
namespace {

struct LlamaFamily {
  using ModelConfig = models::LlamaConfig;
  using Programs = LlamaPrograms;
  using Sampler = models::LlamaSampler;
  static constexpr const char* name = "llama";
  static constexpr auto hyper_graph = freeze<models::llama<models::kLlamaTiny>>();
  template <ModelConfig P, int Order>
  static const Programs& programs(const Config& c) {
    if (c.integer("moe_experts") == 0 && c.integer("moe_top_k") != 2)  // a dense model: no experts to choose among
      throw config_error("moe_top_k=" + std::to_string(c.integer("moe_top_k")) +
                         " chooses among experts, and moe_experts=0 is a dense model: set moe_experts=4 with it (or leave moe_top_k at 2)");
    if (c.integer("moe_top_k") != 2 && c.integer("moe_experts") == 4) {  // compiled as the variant moe_top_k=1 of the dense preset
      Config alone = c;
      alone.set("moe_experts=0", "moe_top_k");
      return find_variant<LlamaPrograms>("llama", "size=" + c.text("size"), alone, llama_space<P, Order>, P.n_head);
    }
    return find_variant<LlamaPrograms>("llama", "size=" + c.text("size"), c, llama_space<P, Order>, P.n_head);
  }
  static std::vector<const char*> aux_outputs(const ModelConfig& v) {
    if (v.moe_experts == 0) return {};
    return {"moe.balance", "moe.z", "moe.dropped"};
  }
  static std::string describe(const ModelConfig& v) {
    std::string s = std::to_string(v.n_layer) + " layers, " + std::to_string(v.n_head) + " heads over " + std::to_string(v.kv_heads) +
                    " key/value heads, d_model " + std::to_string(v.d_model) + "; RMSNorm, SwiGLU, RoPE (" +
                    (v.rope_interleaved ? "interleaved" : "half-split") + ")";
    if (v.qk_norm) s += ", QK-norm";
    if (v.window) s += ", window " + std::to_string(v.window);
    if (v.bias) s += ", biases";
    if (v.moe_experts) s += ", " + std::to_string(v.moe_experts) + " experts top-" + std::to_string(v.moe_top_k) + " of width " + std::to_string(v.d_ff);
    if (v.ffn_mult > 1) s += ", MLP width " + std::to_string(v.d_ff * v.ffn_mult);
    return s + (v.tie ? ", tied output" : ", untied output");
  }
};

Schema llama_schema() {
  using models::kLlamaSmall;
  Schema s;
  s.choice("size", "small", {"tiny", "small", "medium"}, "preset: tiny (tests), small (the GPT main job's sizes), medium", Role::model);
  s = lm_schema(std::move(s));
  s.integer("kv_heads", kLlamaSmall.kv_heads, {.min = 1, .max = 1024}, "architecture: key/value heads (grouped-query attention; 1: multi-query)",
            Role::model)
      .choice("rope", "half", {"half", "interleaved"}, "architecture: RoPE pairs features (i, i + d/2) (Llama) or (2i, 2i+1) (GPT-J)", Role::model)
      .flag("qk_norm", false, "architecture: RMSNorm over each head's q and k (Qwen3)", Role::model)
      .integer("window", 0, {.min = 0, .max = 1 << 20}, "architecture: sliding-window attention over this many positions (0: all)", Role::model)
      .flag("bias", false, "architecture: biases in the linear layers", Role::model)
      .flag("tie_embeddings", false, "architecture: the output projection is the token embedding's transpose", Role::model)
      .integer("moe_experts", 0, {.min = 0, .max = 4}, "architecture: a mixture of this many SwiGLU experts in every layer (0: dense; 4)",
               Role::model)
      .integer("moe_top_k", 2, {.min = 1, .max = 2}, "architecture: experts per token, of moe_experts (1 needs moe_experts=4)", Role::model)
      .integer("ffn_mult", 1, {.min = 1, .max = 4}, "architecture: the dense MLP's width in multiples of the preset's (1, 2, 4)", Role::model)
      .real("moe_balance_weight", 0.01, {.min = 0, .max = 100}, "a mixture of experts: the weight of the load-balancing loss (Switch)")
      .real("moe_z_weight", 0.001, {.min = 0, .max = 100}, "a mixture of experts: the weight of the router z-loss (ST-MoE)");
  s.added_later({"moe_experts", "moe_top_k", "ffn_mult", "moe_balance_weight", "moe_z_weight"});
  add_common_keys(s);
  add_hyper_keys(s, LlamaFamily::hyper_graph, {{"norm_eps", 1e-5}});
  return s;
}

template <models::LlamaConfig P, int Order>
using LlamaSession = LmSession<LlamaFamily, P, Order>;

Task llama_task() {
  Task t;
  t.name = "llama";
  t.summary = "decoder-only LM (Llama: RoPE, grouped-query attention, RMSNorm, SwiGLU) on the KJV Bible";
  t.schema = llama_schema();
  t.data_parallel = true;
  t.commands.push_back({"sample", "continue a prompt with the trained model (key/value cache)", lm_sample_options()});
  t.dependent_defaults = fit_context_by_size(
      {{"tiny", models::kLlamaTiny.context}, {"small", models::kLlamaSmall.context}, {"medium", models::kLlamaMedium.context}});
  t.open = open_presets("llama", "size",
                        {{"size=tiny", &open_session<LlamaSession<models::kLlamaTiny, kLlamaOrderTiny>>} CTGRAD_UNLESS_SMOKE(
                            , {"size=small", &open_session<LlamaSession<models::kLlamaSmall, kLlamaOrderSmall>>},
                            {"size=medium", &open_session<LlamaSession<models::kLlamaMedium, kLlamaOrderMedium>>})});
  return t;
}

const bool registered = register_task(llama_task());

}  // namespace
}  // namespace ctgrad::cli
