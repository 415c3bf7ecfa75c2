// BERT's config.json (BertConfig of Hugging Face transformers) to models::BertConfig and back, and
// its tensor names: "bert.embeddings.*", "bert.encoder.layer.<l>.attention.self.query" ...,
// the masked-LM head "cls.predictions.*" (its decoder tied to the word embeddings), and with
// BertForPreTraining the pooler and "cls.seq_relationship" (next-sentence prediction).
#include <charconv>

#include <ctgrad/pretrained/hf_families.hpp>

namespace ctgrad::pretrained::detail {

HfModel bert_from_config(HfConfig& c, const std::vector<std::string>& architectures) {
  HfModel m;
  m.model_type = "bert";
  m.architecture = architectures.empty() ? "BertForMaskedLM" : architectures.front();
  if (m.architecture != "BertForMaskedLM" && m.architecture != "BertForPreTraining")
    c.refuse("architectures names " + m.architecture + ": ctgrad reads BertForMaskedLM and BertForPreTraining folders (the masked-LM head)");
  models::BertConfig B;
  B.vocab = int(c.integer("vocab_size", std::nullopt, 1, 1 << 24));
  B.d_model = int(c.integer("hidden_size", std::nullopt, 1, 1 << 16));
  B.n_layer = int(c.integer("num_hidden_layers", std::nullopt, 1, 4096));
  B.heads = int(c.integer("num_attention_heads", std::nullopt, 1, 4096));
  B.d_ff = int(c.integer("intermediate_size", std::nullopt, 1, 1 << 20));
  B.context = int(c.integer("max_position_embeddings", 512, 1, 1 << 24));
  B.segments = int(c.integer("type_vocab_size", 2, 1, 1 << 16));
  B.next_sentence = m.architecture == "BertForPreTraining";
  if (B.d_model % B.heads != 0)
    c.refuse("hidden_size " + std::to_string(B.d_model) + " is not a multiple of num_attention_heads " + std::to_string(B.heads));
  c.require<std::string>("hidden_act", "gelu", "gelu", "ctgrad's BERT uses gelu (erf)");
  c.require<std::string>("position_embedding_type", "absolute", "absolute", "ctgrad's BERT has absolute learned positions");
  c.require<bool>("is_decoder", false, false, "a BERT decoder is not supported");
  c.require<bool>("add_cross_attention", false, false, "BERT with cross-attention is not supported");
  m.hypers.emplace_back("norm_eps", c.real("layer_norm_eps", 1e-12));
  m.hypers.emplace_back("dropout", c.one_dropout({"hidden_dropout_prob", "attention_probs_dropout_prob"}, 0.1, "BERT"));
  c.known({"classifier_dropout", "gradient_checkpointing", "type_vocab_size"});  // a classifier head's, training's
  m.config = B;
  return m;
}

nlohmann::json bert_config_json(const HfModel& m) {
  const models::BertConfig& B = m.bert();
  const double p = m.hyper("dropout", 0.1);
  nlohmann::json j;
  j["architectures"] = {m.architecture};
  j["model_type"] = "bert";
  j["vocab_size"] = B.vocab, j["hidden_size"] = B.d_model, j["num_hidden_layers"] = B.n_layer, j["num_attention_heads"] = B.heads;
  j["intermediate_size"] = B.d_ff, j["max_position_embeddings"] = B.context, j["type_vocab_size"] = B.segments;
  j["hidden_act"] = "gelu", j["layer_norm_eps"] = m.hyper("norm_eps", 1e-12), j["position_embedding_type"] = "absolute";
  j["hidden_dropout_prob"] = p, j["attention_probs_dropout_prob"] = p;
  j["torch_dtype"] = "float32";
  return j;
}

}  // namespace ctgrad::pretrained::detail

namespace ctgrad::pretrained {

HfModel hf_model_of(const models::BertConfig& c, std::vector<std::pair<std::string, double>> hypers) {
  if (c.pre_norm) throw checkpoint::format_error("ctgrad: export: a pre-norm BERT (pre_norm) has no Hugging Face BERT counterpart");
  HfModel m;
  m.model_type = "bert", m.architecture = c.next_sentence ? "BertForPreTraining" : "BertForMaskedLM";
  m.config = c;
  m.hypers = std::move(hypers);
  return m;
}

}  // namespace ctgrad::pretrained

namespace ctgrad::pretrained::detail {

TensorSource bert_tensor(const std::string& param) {
  static const std::pair<const char*, const char*> kWhole[] = {
      {"tok.weight", "bert.embeddings.word_embeddings.weight"},
      {"pos.weight", "bert.embeddings.position_embeddings.weight"},
      {"seg.weight", "bert.embeddings.token_type_embeddings.weight"},
      {"emb_norm.weight", "bert.embeddings.LayerNorm.weight"},
      {"emb_norm.bias", "bert.embeddings.LayerNorm.bias"},
      {"mlm.dense.weight", "cls.predictions.transform.dense.weight"},
      {"mlm.dense.bias", "cls.predictions.transform.dense.bias"},
      {"mlm.norm.weight", "cls.predictions.transform.LayerNorm.weight"},
      {"mlm.norm.bias", "cls.predictions.transform.LayerNorm.bias"},
      {"mlm.bias", "cls.predictions.bias"},
      {"pooler.weight", "bert.pooler.dense.weight"},
      {"pooler.bias", "bert.pooler.dense.bias"},
      {"nsp.out.weight", "cls.seq_relationship.weight"},
      {"nsp.out.bias", "cls.seq_relationship.bias"}};
  for (const auto& [ours, theirs] : kWhole)
    if (param == ours) return {theirs, false, {}};
  // "layer.<l>.<part>" -> "bert.encoder.layer.<l>.<Hugging Face's part>"
  if (param.rfind("layer.", 0) == 0) {
    const std::size_t dot = param.find('.', 6);
    const std::string l = param.substr(6, dot - 6), rest = dot == std::string::npos ? "" : param.substr(dot + 1);
    static const std::pair<const char*, const char*> kParts[] = {
        {"attn.wq.", "attention.self.query."}, {"attn.wk.", "attention.self.key."}, {"attn.wv.", "attention.self.value."},
        {"attn.wo.", "attention.output.dense."}, {"ln_1.", "attention.output.LayerNorm."}, {"ffn.fc1.", "intermediate.dense."},
        {"ffn.fc2.", "output.dense."}, {"ln_2.", "output.LayerNorm."}};
    for (const auto& [ours, theirs] : kParts)
      if (rest.rfind(ours, 0) == 0) return {"bert.encoder.layer." + l + "." + theirs + rest.substr(std::string(ours).size()), false, {}};
  }
  return {param, false, {}};  // no counterpart: reported as missing under its own name
}

std::string bert_canonical(const std::string& stored) {
  // The original checkpoints (bert-base-uncased's file among them) name LayerNorm's parameters
  // gamma and beta, as TensorFlow did; transformers renames them on load.
  std::string name = stored;
  for (const auto& [old, now] : {std::pair<std::string, std::string>{"LayerNorm.gamma", "LayerNorm.weight"}, {"LayerNorm.beta", "LayerNorm.bias"}})
    if (name.size() >= old.size() && name.compare(name.size() - old.size(), std::string::npos, old) == 0)
      name = name.substr(0, name.size() - old.size()) + now;
  // BertModel folders (and some others) store the encoder without the "bert." prefix.
  if (name.rfind("embeddings.", 0) == 0 || name.rfind("encoder.", 0) == 0 || name.rfind("pooler.", 0) == 0) return "bert." + name;
  return name;
}

bool bert_ignores(const HfModel& m, const std::string& canonical) {
  // The head's decoder is tied to the word embeddings (its bias is cls.predictions.bias); older
  // checkpoints keep the position ids buffer; a masked-LM model ignores a stored pooler and
  // next-sentence head, as transformers does.
  if (canonical == "cls.predictions.decoder.weight" || canonical == "cls.predictions.decoder.bias" || canonical == "bert.embeddings.position_ids")
    return true;
  if (!m.bert().next_sentence && (canonical.rfind("bert.pooler.", 0) == 0 || canonical.rfind("cls.seq_relationship.", 0) == 0)) return true;
  return false;
}

}  // namespace ctgrad::pretrained::detail
