// Llama-family config.json (LlamaConfig, MistralConfig, Qwen2Config of Hugging Face transformers)
// to models::LlamaConfig and back. ctgrad's Llama names its parameters as Hugging Face does.
#include <cmath>

#include <ctgrad/pretrained/hf_families.hpp>

namespace ctgrad::pretrained::detail {

namespace {

models::LlamaRopeScaling rope_scaling_of(HfConfig& c) {
  models::LlamaRopeScaling r;
  const nlohmann::json* s = c.object("rope_scaling");
  if (!s) return r;
  HfConfig sub(*s, c.where() + ": rope_scaling");
  std::string type = sub.text("rope_type", sub.has("type") ? std::optional<std::string>(sub.text("type")) : std::nullopt);
  sub.known({"type"});
  if (type == "default") return r;
  if (type == "linear") {
    r.type = RopeScaling::linear;
    r.factor = sub.real("factor");
  } else if (type == "llama3") {
    r.type = RopeScaling::llama3;
    r.factor = sub.real("factor");
    r.low_freq_factor = sub.real("low_freq_factor");
    r.high_freq_factor = sub.real("high_freq_factor");
    r.original_context = double(sub.integer("original_max_position_embeddings", std::nullopt, 1));
    if (!(r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor))
      sub.refuse("low_freq_factor " + std::to_string(r.low_freq_factor) + " and high_freq_factor " + std::to_string(r.high_freq_factor) +
                 " must satisfy 0 < low < high");
  } else {
    sub.refuse("rope_type '" + type + "' is not supported (ctgrad computes default, linear and llama3 RoPE scaling; not dynamic, yarn, longrope)");
  }
  if (!(r.factor >= 1)) sub.refuse("factor " + std::to_string(r.factor) + " must be at least 1");
  sub.finish("RoPE scaling '" + type + "'");
  return r;
}

}  // namespace

HfModel llama_from_config(HfConfig& c, const std::string& model_type) {
  HfModel m;
  m.model_type = model_type;
  models::LlamaConfig L;
  L.vocab = int(c.integer("vocab_size", std::nullopt, 1, 1 << 24));
  L.d_model = int(c.integer("hidden_size", std::nullopt, 1, 1 << 16));
  L.n_layer = int(c.integer("num_hidden_layers", std::nullopt, 1, 4096));
  L.n_head = int(c.integer("num_attention_heads", std::nullopt, 1, 4096));
  L.kv_heads = int(c.integer("num_key_value_heads", L.n_head, 1, 4096));
  L.d_ff = int(c.integer("intermediate_size", std::nullopt, 1, 1 << 20));
  L.context = int(c.integer("max_position_embeddings", 2048, 1, 1 << 24));
  if (L.d_model % L.n_head != 0)
    c.refuse("hidden_size " + std::to_string(L.d_model) + " is not a multiple of num_attention_heads " + std::to_string(L.n_head));
  if (L.n_head % L.kv_heads != 0)
    c.refuse("num_attention_heads " + std::to_string(L.n_head) + " is not a multiple of num_key_value_heads " + std::to_string(L.kv_heads));
  if (c.has("head_dim") && c.integer("head_dim", std::nullopt, 1) != L.d_model / L.n_head)
    c.refuse("head_dim " + std::to_string(c.integer("head_dim")) + " differs from hidden_size / num_attention_heads = " + std::to_string(L.d_model / L.n_head) +
             ": ctgrad's attention heads are hidden_size / num_attention_heads wide");
  if ((L.d_model / L.n_head) % 2 != 0) c.refuse("the head width " + std::to_string(L.d_model / L.n_head) + " is odd: RoPE pairs features");
  c.require<std::string>("hidden_act", "silu", "silu", "ctgrad's Llama MLP is SwiGLU (silu)");
  c.require<double>("partial_rotary_factor", 1.0, 1.0, "ctgrad's Llama rotates every feature of a head");
  c.require<double>("attention_dropout", 0.0, 0.0, "ctgrad's Llama has one dropout (set with --set dropout=)");
  L.rope_theta = c.real("rope_theta", 10000.0);
  if (!(L.rope_theta > 0)) c.refuse("rope_theta must be positive");
  L.rope_scaling = rope_scaling_of(c);
  L.tie = c.flag("tie_word_embeddings", false);
  m.hypers.emplace_back("norm_eps", c.real("rms_norm_eps", 1e-6));
  if (!(m.hypers.back().second > 0)) c.refuse("rms_norm_eps must be positive");
  c.known({"pretraining_tp"});  // Hugging Face's slicing of the projections: the same sums
  if (model_type == "llama") {
    m.architecture = "LlamaForCausalLM";
    const bool attention_bias = c.flag("attention_bias", false), mlp_bias = c.flag("mlp_bias", false);
    if (attention_bias != mlp_bias)
      c.refuse(std::string("attention_bias ") + (attention_bias ? "true" : "false") + " with mlp_bias " + (mlp_bias ? "true" : "false") +
               ": ctgrad's Llama has biases in every linear layer or in none (or q/k/v only, as Qwen2)");
    L.bias = attention_bias;
  } else if (model_type == "mistral") {
    m.architecture = "MistralForCausalLM";
    // MistralConfig's default window is 4096: absent is that, null is none.
    L.window = int(c.integer("sliding_window", c.present("sliding_window") ? 0 : 4096, 0, 1 << 24));
    if (L.window >= L.context) L.window = 0;  // covers every position: no window
  } else {  // qwen2: biases on q, k and v
    m.architecture = "Qwen2ForCausalLM";
    L.qkv_bias = true;
    c.require<bool>("use_sliding_window", false, false, "Qwen2's sliding window (on layers past max_window_layers) is not supported");
    c.known({"sliding_window", "max_window_layers"});  // used only with use_sliding_window
  }
  m.config = L;
  return m;
}

nlohmann::json llama_config_json(const HfModel& m) {
  const models::LlamaConfig& L = m.llama();
  nlohmann::json j;
  j["architectures"] = {m.architecture};
  j["model_type"] = m.model_type;
  j["vocab_size"] = L.vocab, j["hidden_size"] = L.d_model, j["intermediate_size"] = L.d_ff * L.ffn_mult;
  j["num_hidden_layers"] = L.n_layer, j["num_attention_heads"] = L.n_head, j["num_key_value_heads"] = L.kv_heads;
  j["head_dim"] = L.d_model / L.n_head;
  j["hidden_act"] = "silu", j["max_position_embeddings"] = L.context;
  j["rms_norm_eps"] = m.hyper("norm_eps", 1e-5), j["rope_theta"] = L.rope_theta;
  j["tie_word_embeddings"] = L.tie;
  j["attention_dropout"] = 0.0;
  const models::LlamaRopeScaling& r = L.rope_scaling;
  if (r.type == RopeScaling::linear) j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", r.factor}};
  else if (r.type == RopeScaling::llama3)
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", r.factor}, {"low_freq_factor", r.low_freq_factor},
                         {"high_freq_factor", r.high_freq_factor}, {"original_max_position_embeddings", std::int64_t(r.original_context)}};
  else j["rope_scaling"] = nullptr;
  if (m.model_type == "llama") j["attention_bias"] = L.bias, j["mlp_bias"] = L.bias;
  if (m.model_type == "mistral") j["sliding_window"] = L.window;
  if (m.model_type == "qwen2") j["use_sliding_window"] = false;
  j["torch_dtype"] = "float32";
  return j;
}

}  // namespace ctgrad::pretrained::detail

namespace ctgrad::pretrained {

HfModel hf_model_of(const models::LlamaConfig& c, std::vector<std::pair<std::string, double>> hypers) {
  auto refuse = [](const std::string& what) {
    throw checkpoint::format_error("ctgrad: export: " + what + " has no Hugging Face Llama, Mistral or Qwen2 counterpart");
  };
  if (c.moe_experts) refuse("a mixture of experts (moe_experts)");
  if (c.rope_interleaved) refuse("interleaved RoPE pairs (rope=interleaved)");
  if (c.qk_norm) refuse("QK-norm (qk_norm)");
  if (c.window && (c.bias || c.qkv_bias)) refuse("a sliding window with biases");
  if (c.bias && c.qkv_bias) refuse("biases everywhere and on q/k/v alone at once");
  HfModel m;
  m.model_type = c.window ? "mistral" : c.qkv_bias ? "qwen2" : "llama";
  m.architecture = c.window ? "MistralForCausalLM" : c.qkv_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
  m.config = c;
  m.hypers = std::move(hypers);
  return m;
}

}  // namespace ctgrad::pretrained

namespace ctgrad::pretrained::detail {

TensorSource llama_tensor(const std::string& param) { return {param, false, {}}; }

bool llama_ignores(const HfModel& m, const std::string& name) {
  if (name == "lm_head.weight") return m.llama().tie;  // a tied head's copy (Hugging Face ties it too)
  // Older checkpoints saved RoPE's inverse frequencies as a buffer: recomputed from the config.
  return name.size() > 21 && name.rfind("model.layers.", 0) == 0 && name.ends_with(".self_attn.rotary_emb.inv_freq");
}

}  // namespace ctgrad::pretrained::detail
