// GPT-2's config.json (GPT2Config of Hugging Face transformers) to models::GptConfig and back, and
// its tensor names: the body under "transformer.", the fused q/k/v projection "attn.c_attn", the
// MLP "mlp.c_fc" / "mlp.c_proj", all Conv1D layers whose weights are stored [in, out].
#include <charconv>

#include <ctgrad/pretrained/hf_families.hpp>

namespace ctgrad::pretrained::detail {

HfModel gpt2_from_config(HfConfig& c) {
  HfModel m;
  m.model_type = "gpt2", m.architecture = "GPT2LMHeadModel";
  models::GptConfig G;  // GPT-2's architecture: pre-norm LayerNorm, gelu (tanh), learned positions, biases
  G.vocab = int(c.integer("vocab_size", std::nullopt, 1, 1 << 24));
  G.d_model = int(c.integer("n_embd", std::nullopt, 1, 1 << 16));
  G.n_layer = int(c.integer("n_layer", std::nullopt, 1, 4096));
  G.n_head = int(c.integer("n_head", std::nullopt, 1, 4096));
  G.context = int(c.integer("n_positions", std::nullopt, 1, 1 << 24));
  if (c.has("n_ctx") && c.integer("n_ctx", std::nullopt, 1) != G.context)
    c.refuse("n_ctx " + std::to_string(c.integer("n_ctx")) + " differs from n_positions " + std::to_string(G.context));
  c.known({"n_ctx"});
  G.d_ff = int(c.integer("n_inner", 0, 0, 1 << 20));
  if (G.d_model % G.n_head != 0) c.refuse("n_embd " + std::to_string(G.d_model) + " is not a multiple of n_head " + std::to_string(G.n_head));
  const std::string act = c.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    c.refuse("activation_function '" + act + "' is not supported (ctgrad's GPT-2 MLP is gelu with the tanh approximation: gelu_new)");
  G.arch.tie = c.flag("tie_word_embeddings", true);
  c.require<bool>("scale_attn_weights", true, true, "ctgrad scales attention scores by 1/sqrt(head width)");
  c.require<bool>("scale_attn_by_inverse_layer_idx", false, false, "ctgrad does not scale scores by layer");
  c.require<bool>("add_cross_attention", false, false, "GPT-2 with cross-attention is not supported");
  c.known({"reorder_and_upcast_attn"});  // float32 either way
  // GPT2DoubleHeadsModel's classification head: not part of the language model.
  c.known({"summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj"});
  m.hypers.emplace_back("norm_eps", c.real("layer_norm_epsilon", 1e-5));
  m.hypers.emplace_back("dropout", c.one_dropout({"resid_pdrop", "embd_pdrop", "attn_pdrop"}, 0.1, "GPT"));
  m.config = G;
  return m;
}

nlohmann::json gpt2_config_json(const HfModel& m) {
  const models::GptConfig& G = m.gpt();
  const double p = m.hyper("dropout", 0.0);
  nlohmann::json j;
  j["architectures"] = {"GPT2LMHeadModel"};
  j["model_type"] = "gpt2";
  j["vocab_size"] = G.vocab, j["n_embd"] = G.d_model, j["n_layer"] = G.n_layer, j["n_head"] = G.n_head;
  j["n_positions"] = G.context, j["n_ctx"] = G.context;
  j["n_inner"] = G.d_ff ? nlohmann::json(G.d_ff) : nlohmann::json(nullptr);
  j["activation_function"] = "gelu_new";
  j["layer_norm_epsilon"] = m.hyper("norm_eps", 1e-5);
  j["resid_pdrop"] = p, j["embd_pdrop"] = p, j["attn_pdrop"] = p;
  j["scale_attn_weights"] = true, j["tie_word_embeddings"] = G.arch.tie;
  j["torch_dtype"] = "float32";
  return j;
}

}  // namespace ctgrad::pretrained::detail

namespace ctgrad::pretrained {

HfModel hf_model_of(const models::GptConfig& c, std::vector<std::pair<std::string, double>> hypers) {
  auto refuse = [](const std::string& what) { throw checkpoint::format_error("ctgrad: export: " + what + " has no Hugging Face GPT-2 counterpart"); };
  const models::GptConfig gpt2{};
  if (c.mixer != layers::Mixer::attention) refuse("a state-space mixer (mixer=ssm)");
  if (c.kv_heads && c.kv_heads != c.n_head) refuse("grouped-query attention (kv_heads)");
  if (c.qk_norm) refuse("QK-norm (qk_norm)");
  if (!c.bias) refuse("a model without biases (bias=false)");
  if (c.arch.norm != gpt2.arch.norm || c.arch.norm_kind != gpt2.arch.norm_kind) refuse("a norm other than pre-norm LayerNorm");
  if (c.arch.act != gpt2.arch.act) refuse("an activation other than gelu (tanh)");
  if (c.arch.pos != gpt2.arch.pos) refuse("positions other than a learned table");
  HfModel m;
  m.model_type = "gpt2", m.architecture = "GPT2LMHeadModel";
  m.config = c;
  m.hypers = std::move(hypers);
  return m;
}

}  // namespace ctgrad::pretrained

namespace ctgrad::pretrained::detail {

namespace {
// "h.3.attn.qkv.weight" -> {"3", "attn.qkv.weight"}; false when not a block's parameter.
bool split_block(const std::string& name, std::string& layer, std::string& rest) {
  if (name.rfind("h.", 0) != 0) return false;
  const std::size_t dot = name.find('.', 2);
  if (dot == std::string::npos) return false;
  layer = name.substr(2, dot - 2), rest = name.substr(dot + 1);
  return true;
}
}  // namespace

TensorSource gpt2_tensor(const std::string& param) {
  if (param.rfind("lm_head.", 0) == 0) return {param, false, {}};
  std::string layer, rest;
  if (!split_block(param, layer, rest)) return {"transformer." + param, false, {}};  // wte, wpe, ln_f
  static const std::pair<const char*, const char*> kRenamed[] = {
      {"attn.qkv.", "attn.c_attn."}, {"attn.wo.", "attn.c_proj."}, {"mlp.fc1.", "mlp.c_fc."}, {"mlp.fc2.", "mlp.c_proj."}};
  for (const auto& [ours, theirs] : kRenamed)
    if (rest.rfind(ours, 0) == 0) {
      const std::string leaf = rest.substr(std::string(ours).size());
      return {"transformer.h." + layer + "." + theirs + leaf, leaf == "weight", {}};  // Conv1D: [in, out]
    }
  return {"transformer.h." + layer + "." + rest, false, {}};  // ln_1, ln_2
}

std::string gpt2_canonical(const std::string& name) {
  if (name.rfind("transformer.", 0) == 0 || name.rfind("lm_head.", 0) == 0) return name;
  return "transformer." + name;
}

bool gpt2_ignores(const HfModel& m, const std::string& canonical) {
  if (canonical == "lm_head.weight") return m.gpt().arch.tie;  // the tied head's copy
  // The causal mask buffers of older checkpoints: "transformer.h.<l>.attn.bias" / ".attn.masked_bias".
  std::string layer, rest;
  if (canonical.rfind("transformer.", 0) != 0 || !split_block(canonical.substr(12), layer, rest)) return false;
  int l = 0;
  if (std::from_chars(layer.data(), layer.data() + layer.size(), l).ec != std::errc() || l < 0 || l >= m.gpt().n_layer) return false;
  return rest == "attn.bias" || rest == "attn.masked_bias";
}

}  // namespace ctgrad::pretrained::detail
