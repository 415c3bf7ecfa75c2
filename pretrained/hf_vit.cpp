// ViT's config.json (ViTConfig of Hugging Face transformers) to models::VitConfig and back, and its
// tensor names: "vit.embeddings.*" (the patch projection a convolution [d, C, p, p]: ctgrad's
// patch_embed weight [d, C*p*p] in the same order), "vit.encoder.layer.<l>.*", "vit.layernorm"
// and the "classifier".
#include <charconv>

#include <ctgrad/pretrained/hf_families.hpp>

namespace ctgrad::pretrained::detail {

HfModel vit_from_config(HfConfig& c) {
  HfModel m;
  m.model_type = "vit", m.architecture = "ViTForImageClassification";
  models::VitConfig V;
  V.d_model = int(c.integer("hidden_size", 768, 1, 1 << 16));
  V.n_layer = int(c.integer("num_hidden_layers", 12, 1, 4096));
  V.heads = int(c.integer("num_attention_heads", 12, 1, 4096));
  V.d_mlp = int(c.integer("intermediate_size", 3072, 1, 1 << 20));
  V.image = int(c.integer("image_size", 224, 1, 1 << 16));
  V.patch = int(c.integer("patch_size", 16, 1, 1 << 12));
  V.channels = int(c.integer("num_channels", 3, 1, 64));
  if (V.d_model % V.heads != 0)
    c.refuse("hidden_size " + std::to_string(V.d_model) + " is not a multiple of num_attention_heads " + std::to_string(V.heads));
  if (V.image % V.patch != 0) c.refuse("patch_size " + std::to_string(V.patch) + " does not divide image_size " + std::to_string(V.image));
  // The classes: id2label's entries (ViTForImageClassification's num_labels), 2 when absent.
  V.classes = 2;
  if (const nlohmann::json* labels = c.object("id2label")) {
    V.classes = int(labels->size());
    if (V.classes < 1 || V.classes > (1 << 20)) c.refuse("id2label holds " + std::to_string(V.classes) + " labels");
    m.labels.resize(std::size_t(V.classes));
    for (const auto& [key, name] : labels->items()) {  // "0": "tench", ...: every id from 0 once
      int id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= V.classes || !name.is_string() || !m.labels[std::size_t(id)].empty())
        c.refuse("id2label is not the labels 0.." + std::to_string(V.classes - 1) + ", each named once");
      m.labels[std::size_t(id)] = name.get<std::string>();
      if (m.labels[std::size_t(id)].empty()) c.refuse("id2label names label " + std::to_string(id) + " with an empty string");
    }
  }
  c.known({"label2id"});
  c.require<std::string>("hidden_act", "gelu", "gelu", "ctgrad's ViT uses gelu (erf)");
  c.require<bool>("qkv_bias", true, true, "ctgrad's ViT has biases on q, k and v");
  c.known({"encoder_stride", "pooler_output_size", "pooler_act"});  // masked image modelling's decoder, ViTModel's pooler
  m.hypers.emplace_back("norm_eps", c.real("layer_norm_eps", 1e-12));
  m.hypers.emplace_back("dropout", c.one_dropout({"hidden_dropout_prob", "attention_probs_dropout_prob"}, 0.0, "ViT"));
  m.config = V;
  return m;
}

nlohmann::json vit_config_json(const HfModel& m) {
  const models::VitConfig& V = m.vit();
  const double p = m.hyper("dropout", 0.0);
  nlohmann::json j;
  j["architectures"] = {"ViTForImageClassification"};
  j["model_type"] = "vit";
  j["hidden_size"] = V.d_model, j["num_hidden_layers"] = V.n_layer, j["num_attention_heads"] = V.heads, j["intermediate_size"] = V.d_mlp;
  j["image_size"] = V.image, j["patch_size"] = V.patch, j["num_channels"] = V.channels;
  j["hidden_act"] = "gelu", j["layer_norm_eps"] = m.hyper("norm_eps", 1e-12), j["qkv_bias"] = true;
  j["hidden_dropout_prob"] = p, j["attention_probs_dropout_prob"] = p;
  nlohmann::json labels = nlohmann::json::object();
  for (int i = 0; i < V.classes; ++i)
    labels[std::to_string(i)] = std::size_t(i) < m.labels.size() ? m.labels[std::size_t(i)] : "LABEL_" + std::to_string(i);
  j["id2label"] = labels;
  j["torch_dtype"] = "float32";
  return j;
}

}  // namespace ctgrad::pretrained::detail

namespace ctgrad::pretrained {

HfModel hf_model_of(const models::VitConfig& c, std::vector<std::pair<std::string, double>> hypers) {
  const models::VitConfig vit{};
  auto refuse = [](const std::string& what) { throw checkpoint::format_error("ctgrad: export: " + what + " has no Hugging Face ViT counterpart"); };
  if (c.mean_pool) refuse("mean pooling (mean_pool)");
  if (c.arch.norm != vit.arch.norm || c.arch.norm_kind != vit.arch.norm_kind) refuse("a norm other than pre-norm LayerNorm");
  if (c.arch.act != vit.arch.act) refuse("an activation other than gelu");
  if (c.arch.pos != vit.arch.pos) refuse("positions other than a learned table");
  HfModel m;
  m.model_type = "vit", m.architecture = "ViTForImageClassification";
  m.config = c;
  m.hypers = std::move(hypers);
  return m;
}

}  // namespace ctgrad::pretrained

namespace ctgrad::pretrained::detail {

TensorSource vit_tensor(const HfModel& m, const std::string& param) {
  const models::VitConfig& V = m.vit();
  if (param == "patch_embed.weight")
    return {"vit.embeddings.patch_embeddings.projection.weight", false, {V.d_model, V.channels, V.patch, V.patch}};
  static const std::pair<const char*, const char*> kWhole[] = {
      {"patch_embed.bias", "vit.embeddings.patch_embeddings.projection.bias"}, {"cls", "vit.embeddings.cls_token"},
      {"pos", "vit.embeddings.position_embeddings"}, {"head_norm.weight", "vit.layernorm.weight"}, {"head_norm.bias", "vit.layernorm.bias"},
      {"head.weight", "classifier.weight"}, {"head.bias", "classifier.bias"}};
  for (const auto& [ours, theirs] : kWhole)
    if (param == ours) return {theirs, false, {}};
  if (param.rfind("vit.", 0) == 0) {  // "vit.<l>.<part>" -> "vit.encoder.layer.<l>.<Hugging Face's part>"
    const std::size_t dot = param.find('.', 4);
    const std::string l = param.substr(4, dot - 4), rest = dot == std::string::npos ? "" : param.substr(dot + 1);
    static const std::pair<const char*, const char*> kParts[] = {
        {"ln_1.", "layernorm_before."}, {"attn.wq.", "attention.attention.query."}, {"attn.wk.", "attention.attention.key."},
        {"attn.wv.", "attention.attention.value."}, {"attn.wo.", "attention.output.dense."}, {"ln_2.", "layernorm_after."},
        {"mlp.fc1.", "intermediate.dense."}, {"mlp.fc2.", "output.dense."}};
    for (const auto& [ours, theirs] : kParts)
      if (rest.rfind(ours, 0) == 0) return {"vit.encoder.layer." + l + "." + theirs + rest.substr(std::string(ours).size()), false, {}};
  }
  return {param, false, {}};
}

bool vit_ignores(const std::string& canonical) {
  return canonical.rfind("vit.pooler.", 0) == 0;  // ViTModel's pooler: ViTForImageClassification does not use it either
}

}  // namespace ctgrad::pretrained::detail
