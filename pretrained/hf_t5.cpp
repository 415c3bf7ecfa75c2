// T5's config.json (T5Config of Hugging Face transformers) to models::T5Config and back, and its
// tensor names: "shared", "encoder.block.<l>.layer.0.SelfAttention.{q,k,v,o}", layer 0's
// "relative_attention_bias" (one table per stack), "layer.<1|2>.DenseReluDense.{wi,wo}" (v1.0's
// ReLU) or "{wi_0,wi_1,wo}" (v1.1's gated GELU), the decoder's "layer.1.EncDecAttention", the
// stacks' "final_layer_norm", and "lm_head" when the output is not tied to the embedding.
#include <ctgrad/pretrained/hf_families.hpp>

namespace ctgrad::pretrained::detail {

HfModel t5_from_config(HfConfig& c, const std::vector<std::string>& architectures) {
  HfModel m;
  m.model_type = "t5";
  m.architecture = architectures.empty() ? "T5ForConditionalGeneration" : architectures.front();
  if (m.architecture != "T5ForConditionalGeneration")
    c.refuse("architectures names " + m.architecture + ": ctgrad reads T5ForConditionalGeneration folders (the encoder-decoder with its LM head)");
  models::T5Config T;
  T.vocab = int(c.integer("vocab_size", 32128, 1, 1 << 24));
  T.d_model = int(c.integer("d_model", 512, 1, 1 << 16));
  T.heads = int(c.integer("num_heads", 8, 1, 4096));
  T.d_ff = int(c.integer("d_ff", 2048, 1, 1 << 20));
  T.n_layer = int(c.integer("num_layers", 6, 1, 4096));
  T.n_dec_layer = c.has("num_decoder_layers") ? int(c.integer("num_decoder_layers", std::nullopt, 1, 4096)) : T.n_layer;
  c.known({"num_decoder_layers"});
  T.buckets = int(c.integer("relative_attention_num_buckets", 32, 2, 1 << 16));
  T.max_distance = int(c.integer("relative_attention_max_distance", 128, 1, 1 << 24));
  if (T.buckets < 4 || T.buckets % 2 || T.max_distance <= T.buckets / 2)  // the logarithmic buckets need room: max_exact = buckets / 4 or / 2
    c.refuse("relative_attention_num_buckets " + std::to_string(T.buckets) + " and relative_attention_max_distance " + std::to_string(T.max_distance) +
             ": the buckets must be even, at least 4, and the distance more than half of them");
  const std::int64_t d_kv = c.integer("d_kv", 64, 1, 1 << 16);
  if (T.d_model % T.heads != 0 || d_kv != T.d_model / T.heads)
    c.refuse("d_kv " + std::to_string(d_kv) + " is not d_model " + std::to_string(T.d_model) + " / num_heads " + std::to_string(T.heads) +
             ": ctgrad's attention projects to d_model (t5-v1_1-small and flan-t5-small project to num_heads x d_kv)");
  const std::string ffn = c.text("feed_forward_proj", "relu");
  if (ffn == "relu") T.ffn_act = layers::Act::relu;
  else if (ffn == "gated-gelu") T.ffn_act = layers::Act::gated_gelu;
  else c.refuse("feed_forward_proj '" + ffn.substr(0, 40) + "': ctgrad's T5 has relu (v1.0) and gated-gelu (v1.1)");
  c.known({"is_gated_act", "dense_act_fn"});  // derived from feed_forward_proj
  T.tied = c.flag("tie_word_embeddings", true);
  T.pad = int(c.integer("pad_token_id", 0, 0, T.vocab - 1));
  if (c.integer("decoder_start_token_id", T.pad, 0, T.vocab - 1) != T.pad)
    c.refuse("decoder_start_token_id is not pad_token_id " + std::to_string(T.pad) + ": ctgrad's T5 decoder starts from the padding token");
  c.require<bool>("is_encoder_decoder", true, true, "ctgrad reads T5 as an encoder-decoder");
  c.known({"initializer_factor"});  // the init of new weights: a loaded model has none
  m.hypers.emplace_back("norm_eps", c.real("layer_norm_epsilon", 1e-6));
  m.hypers.emplace_back("dropout", c.one_dropout({"dropout_rate"}, 0.1, "T5"));
  c.known({"classifier_dropout", "n_positions", "output_past", "gradient_checkpointing"});  // a classifier head's; old configs' unused fields
  m.config = T;
  return m;
}

nlohmann::json t5_config_json(const HfModel& m) {
  const models::T5Config& T = m.t5();
  nlohmann::json j;
  j["architectures"] = {"T5ForConditionalGeneration"};
  j["model_type"] = "t5";
  j["vocab_size"] = T.vocab, j["d_model"] = T.d_model, j["d_kv"] = T.d_model / T.heads, j["d_ff"] = T.d_ff, j["num_heads"] = T.heads;
  j["num_layers"] = T.n_layer, j["num_decoder_layers"] = T.n_dec_layer;
  j["relative_attention_num_buckets"] = T.buckets, j["relative_attention_max_distance"] = T.max_distance;
  j["feed_forward_proj"] = T.ffn_act == layers::Act::relu ? "relu" : "gated-gelu";
  j["tie_word_embeddings"] = T.tied;
  j["dropout_rate"] = m.hyper("dropout", 0.1), j["layer_norm_epsilon"] = m.hyper("norm_eps", 1e-6), j["initializer_factor"] = 1.0;
  j["is_encoder_decoder"] = true, j["pad_token_id"] = T.pad, j["decoder_start_token_id"] = T.pad, j["eos_token_id"] = 1;
  j["torch_dtype"] = "float32";
  return j;
}

}  // namespace ctgrad::pretrained::detail

namespace ctgrad::pretrained {

HfModel hf_model_of(const models::T5Config& c, std::vector<std::pair<std::string, double>> hypers) {
  if (c.ffn_act != layers::Act::relu && c.ffn_act != layers::Act::gated_gelu)
    throw checkpoint::format_error("ctgrad: export: a T5 feed-forward other than relu or gated GELU has no Hugging Face T5 counterpart");
  HfModel m;
  m.model_type = "t5", m.architecture = "T5ForConditionalGeneration";
  m.config = c;
  m.hypers = std::move(hypers);
  return m;
}

}  // namespace ctgrad::pretrained

namespace ctgrad::pretrained::detail {

TensorSource t5_tensor(const std::string& param) {
  if (param == "shared.weight" || param == "lm_head.weight") return {param, false, {}};
  for (const auto& [ours, theirs] : {std::pair{"enc.", "encoder."}, {"dec.", "decoder."}}) {
    if (param.rfind(ours, 0) != 0) continue;
    const std::string rest = param.substr(4), stack = theirs;
    if (rest == "rel_bias.weight") return {stack + "block.0.layer.0.SelfAttention.relative_attention_bias.weight", false, {}};
    if (rest == "final_norm.weight") return {stack + "final_layer_norm.weight", false, {}};
    const std::size_t dot = rest.find('.');
    if (dot == std::string::npos) break;
    const std::string l = rest.substr(0, dot), part = rest.substr(dot + 1), block = stack + "block." + l + ".layer.";
    const bool decoder = ours[0] == 'd';
    const std::string ffn = decoder ? "2" : "1";
    static const std::pair<const char*, const char*> kAttention[] = {{"wq.", "q."}, {"wk.", "k."}, {"wv.", "v."}, {"wo.", "o."}};
    for (const auto& [a, b] : kAttention) {
      if (part == std::string("attn.") + a + "weight") return {block + "0.SelfAttention." + b + "weight", false, {}};
      if (decoder && part == std::string("cross.") + a + "weight") return {block + "1.EncDecAttention." + b + "weight", false, {}};
    }
    static const std::pair<const char*, const char*> kFfn[] = {{"ffn.fc1.", "wi."}, {"ffn.fc2.", "wo."}, {"ffn.wi_0.", "wi_0."}, {"ffn.wi_1.", "wi_1."}, {"ffn.wo.", "wo."}};
    for (const auto& [a, b] : kFfn)
      if (part == std::string(a) + "weight") return {block + ffn + ".DenseReluDense." + b + "weight", false, {}};
    if (part == "ln_1.weight") return {block + "0.layer_norm.weight", false, {}};
    if (part == "ln_2.weight") return {block + "1.layer_norm.weight", false, {}};
    if (decoder && part == "ln_3.weight") return {block + "2.layer_norm.weight", false, {}};
  }
  return {param, false, {}};  // no counterpart: reported as missing under its own name
}

bool t5_ignores(const HfModel& m, const std::string& canonical) {
  // The stacks' embed_tokens are the shared table (stored by older checkpoints), as is a tied lm_head;
  // the original checkpoints carry a cross-attention position bias T5 never uses (transformers
  // ignores it on load too).
  return canonical == "encoder.embed_tokens.weight" || canonical == "decoder.embed_tokens.weight" || (m.t5().tied && canonical == "lm_head.weight") ||
         canonical == "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight";
}

}  // namespace ctgrad::pretrained::detail
