// ctgrad train|eval|sample llama: a Llama-style model (models/llama.hpp) on the GPT main job's data
// and recipe (the KJV Bible, characters or BPE; lm_session.hpp), its checkpoints in Hugging Face
// Llama's names (docs/models/llama.md). Its graphs are built from the config at run time: any size,
// any combination of keys.
#include <ctgrad/models/llama.hpp>

#include "lm_session.hpp"

namespace ctgrad::cli {
namespace {

// rope_scaling: "none", "linear:FACTOR" or "llama3:FACTOR:LOW_FREQ_FACTOR:HIGH_FREQ_FACTOR:ORIGINAL_CONTEXT"
// (Hugging Face's rope_scaling of Llama 3.1: llama3:8:1:4:8192).
models::LlamaRopeScaling rope_scaling_of(const std::string& text) {
  models::LlamaRopeScaling r;
  if (text == "none") return r;
  std::vector<double> v;
  const std::size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  for (std::size_t at = colon; at != std::string::npos;) {
    const std::size_t next = text.find(':', at + 1);
    v.push_back(training::parse_real(text.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1), "rope_scaling", {.min = 0, .min_open = true}));
    at = next;
  }
  if (kind == "linear" && v.size() == 1 && v[0] >= 1) return {.type = RopeScaling::linear, .factor = v[0]};
  if (kind == "llama3" && v.size() == 4 && v[0] >= 1 && v[1] < v[2])
    return {.type = RopeScaling::llama3, .factor = v[0], .low_freq_factor = v[1], .high_freq_factor = v[2], .original_context = v[3]};
  throw config_error("rope_scaling '" + text + "': give none, linear:FACTOR (>= 1) or llama3:FACTOR:LOW:HIGH:ORIGINAL_CONTEXT (LOW < HIGH)");
}

std::string rope_scaling_text(const models::LlamaRopeScaling& r) {
  if (r.type == RopeScaling::linear) return "linear:" + exact(r.factor);
  if (r.type == RopeScaling::llama3)
    return "llama3:" + exact(r.factor) + ":" + exact(r.low_freq_factor) + ":" + exact(r.high_freq_factor) + ":" + exact(r.original_context);
  return "none";
}

const models::LlamaConfig& llama_preset(const std::string& size) {
  return size == "tiny" ? models::kLlamaTiny : size == "medium" ? models::kLlamaMedium : models::kLlamaSmall;
}

struct LlamaFamily {
  using ModelConfig = models::LlamaConfig;
  using Sampler = models::LlamaSampler;
  static constexpr const char* name = "llama";
  static const RuntimeGraph& hyper_graph() {
    static const RuntimeGraph g = freeze(models::llama(models::kLlamaTiny));
    return g;
  }
  static ModelConfig model_config(const Config& c) {
    const ModelConfig& p = llama_preset(c.text("size"));
    ModelConfig m = p;
    m.d_model = size_or(c, "d_model", p.d_model), m.n_layer = size_or(c, "layers", p.n_layer), m.n_head = size_or(c, "heads", p.n_head);
    m.d_ff = ff_width(c, m.d_model, 4, true);  // SwiGLU's 2/3 of 4d, as the presets
    m.vocab = size_or(c, "vocab", p.vocab), m.context = size_or(c, "max_context", p.context);
    // kv_heads 0: the preset's when they divide the heads (grouped-query attention), else one per head.
    m.kv_heads = c.integer("kv_heads") ? int(c.integer("kv_heads")) : m.n_head % p.kv_heads == 0 ? p.kv_heads : m.n_head;
    m.rope_interleaved = c.text("rope") == "interleaved", m.qk_norm = c.flag("qk_norm");
    m.window = int(c.integer("window")), m.bias = c.flag("bias"), m.tie = c.flag("tie_embeddings");
    m.moe_experts = int(c.integer("moe_experts")), m.moe_top_k = int(c.integer("moe_top_k")), m.ffn_mult = int(c.integer("ffn_mult"));
    m.qkv_bias = c.flag("qkv_bias"), m.rope_theta = c.real("rope_theta"), m.rope_scaling = rope_scaling_of(c.text("rope_scaling"));
    check_heads(m.d_model, m.n_head, m.kv_heads, true);
    if (m.moe_experts == 0 && m.moe_top_k != 2)  // a dense model: no experts to choose among
      throw config_error("moe_top_k=" + std::to_string(m.moe_top_k) + " chooses among experts, and moe_experts=0 is a dense model: set moe_experts with it (or leave moe_top_k at 2)");
    if (m.moe_experts && m.moe_top_k > m.moe_experts)
      throw config_error("moe_top_k " + std::to_string(m.moe_top_k) + " is more than moe_experts " + std::to_string(m.moe_experts));
    if (m.moe_experts && m.ffn_mult > 1) throw config_error("ffn_mult widens the dense MLP: a mixture of experts (moe_experts) has none");
    return m;
  }
  // --from: a Llama, Mistral or Qwen2 folder's model as keys.
  static std::vector<std::pair<std::string, std::string>> hf_keys(const pretrained::HfModel& m) {
    if (!m.is_llama()) throw config_error("the folder holds a " + m.architecture + ": ctgrad's llama reads Llama, Mistral and Qwen2 folders (" + command_reading(m) + ")");
    const models::LlamaConfig& l = m.llama();
    const auto n = [](int v) { return std::to_string(v); };
    return {{"d_model", n(l.d_model)},  {"layers", n(l.n_layer)},   {"heads", n(l.n_head)},       {"kv_heads", n(l.kv_heads)},
            {"d_ff", n(l.d_ff)},        {"vocab", n(l.vocab)},      {"max_context", n(l.context)}, {"rope", "half"},
            {"qk_norm", "false"},       {"window", n(l.window)},    {"bias", l.bias ? "true" : "false"},
            {"qkv_bias", l.qkv_bias ? "true" : "false"},            {"tie_embeddings", l.tie ? "true" : "false"},
            {"rope_theta", exact(l.rope_theta)},                    {"rope_scaling", rope_scaling_text(l.rope_scaling)},
            {"moe_experts", "0"},       {"moe_top_k", "2"},         {"ffn_mult", "1"},             {"norm_eps", exact(m.hyper("norm_eps", 1e-5))}};
  }
  static Builder train_graph(const ModelConfig& m) { return models::llama(m); }
  static Builder decoder_graph(const ModelConfig& m) { return models::llama_decoder(m); }
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
    if (v.qkv_bias) s += ", q/k/v biases";
    if (v.rope_theta != 10000) s += ", RoPE base " + exact(v.rope_theta);
    if (v.rope_scaling.type != RopeScaling::none) s += ", RoPE scaling " + rope_scaling_text(v.rope_scaling);
    if (v.moe_experts) s += ", " + std::to_string(v.moe_experts) + " experts top-" + std::to_string(v.moe_top_k) + " of width " + std::to_string(v.d_ff);
    else s += ", MLP width " + std::to_string(v.d_ff * v.ffn_mult);
    return s + (v.tie ? ", tied output" : ", untied output");
  }
};

Schema llama_schema() {
  using models::kLlamaSmall;
  Schema s;
  s.choice("size", "small", {"tiny", "small", "medium"},
           "preset, a bundle of sizes any size key overrides: tiny (tests), small (the GPT main job's sizes), medium", Role::model);
  s = lm_schema(std::move(s));
  std::vector<PresetSizes> sizes;
  for (const char* n : {"tiny", "small", "medium"}) {
    const models::LlamaConfig& p = llama_preset(n);
    sizes.push_back({n, p.d_model, p.n_layer, 4, p.vocab, p.context});
  }
  add_size_keys(s, sizes);
  s.integer("heads", 0, {.min = 0, .max = 1024}, "architecture: attention heads (0: the preset's: tiny 4, small 4, medium 8)", Role::model)
      .integer("kv_heads", 0, {.min = 0, .max = 1024},
               "architecture: key/value heads (grouped-query attention; 1: multi-query; 0: the preset's, 2, when they divide the heads, else the heads)",
               Role::model)
      .choice("rope", "half", {"half", "interleaved"}, "architecture: RoPE pairs features (i, i + d/2) (Llama) or (2i, 2i+1) (GPT-J)", Role::model)
      .flag("qk_norm", false, "architecture: RMSNorm over each head's q and k (Qwen3)", Role::model)
      .integer("window", 0, {.min = 0, .max = 1 << 20}, "architecture: sliding-window attention over this many positions (0: all)", Role::model)
      .flag("bias", false, "architecture: biases in the linear layers", Role::model)
      .flag("qkv_bias", false, "architecture: biases in the q, k and v projections alone (Qwen2)", Role::model)
      .real("rope_theta", 10000, {.min = 0, .min_open = true}, "architecture: RoPE's base (Llama 3: 500000)", Role::model)
      .text("rope_scaling", "none", "architecture: RoPE frequency scaling: none, linear:FACTOR, llama3:FACTOR:LOW:HIGH:ORIGINAL_CONTEXT", Role::model)
      .flag("tie_embeddings", false, "architecture: the output projection is the token embedding's transpose", Role::model)
      .integer("moe_experts", 0, {.min = 0, .max = 64}, "architecture: a mixture of this many SwiGLU experts of width d_ff in every layer (0: dense)",
               Role::model)
      .integer("moe_top_k", 2, {.min = 1, .max = 64}, "architecture: experts per token, of moe_experts (a dense model keeps 2)", Role::model)
      .integer("ffn_mult", 1, {.min = 1, .max = 64}, "architecture: the dense MLP's width in multiples of d_ff", Role::model)
      .real("moe_balance_weight", 0.01, {.min = 0, .max = 100}, "a mixture of experts: the weight of the load-balancing loss (Switch)")
      .real("moe_z_weight", 0.001, {.min = 0, .max = 100}, "a mixture of experts: the weight of the router z-loss (ST-MoE)");
  s.added_later({"heads", "moe_experts", "moe_top_k", "ffn_mult", "moe_balance_weight", "moe_z_weight", "qkv_bias", "rope_theta", "rope_scaling"});
  add_common_keys(s);
  add_hyper_keys(s, LlamaFamily::hyper_graph(), {{"norm_eps", 1e-5}});
  return s;
}

Task llama_task() {
  Task t;
  t.name = "llama";
  t.summary = "decoder-only LM (Llama: RoPE, grouped-query attention, RMSNorm, SwiGLU) on the KJV Bible or your text (--set data=PATH)";
  t.schema = llama_schema();
  t.data_parallel = true;
  t.commands.push_back({"sample", "continue a prompt with the trained model (key/value cache)", lm_sample_options()});
  t.dependent_defaults = with_shard_tokenizer(fit_context_to_model([](const Config& c) { return llama_preset(c.text("size")).context; }));
  t.open = &open_session<LmSession<LlamaFamily>>;
  t.check_against_checkpoint = refuse_longer_context;
  t.input_folders = {"data", "val_data"};
  t.from_hf = lm_from_hf<LlamaFamily>;
  t.to_hf = lm_to_hf<LlamaFamily>;
  return t;
}

const bool registered = register_task(llama_task());

}  // namespace
}  // namespace ctgrad::cli
