#include <ctgrad/pretrained/hf_model.hpp>

#include <algorithm>
#include <map>
#include <set>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/checkpoint/tensor_folder.hpp>
#include <ctgrad/pretrained/hf_families.hpp>

namespace ctgrad::pretrained {

namespace fs = std::filesystem;
using checkpoint::format_error;

double HfModel::hyper(const std::string& name, double fallback) const {
  for (const auto& [n, v] : hypers)
    if (n == name) return v;
  return fallback;
}

bool is_hf_folder(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::exists(dir / "config.json", ec);
}

namespace detail {
void known_metadata(HfConfig& c) {
  c.known({"_name_or_path", "transformers_version", "torch_dtype", "dtype", "use_cache", "initializer_range", "bos_token_id", "eos_token_id",
           "pad_token_id", "sep_token_id", "decoder_start_token_id", "id2label", "label2id", "task_specific_params", "tokenizer_class",
           "return_dict", "output_hidden_states", "output_attentions", "torchscript", "is_decoder", "is_encoder_decoder", "problem_type",
           "finetuning_task", "prefix", "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
           "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
           "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
           "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
           "suppress_tokens", "begin_suppress_tokens", "chunk_size_feed_forward", "tie_encoder_decoder", "cross_attention_hidden_size",
           "tf_legacy_loss", "use_bfloat16"});
}
}  // namespace detail

HfModel read_hf_model(const fs::path& dir) {
  HfConfig c(dir);
  const std::string type = c.text("model_type");
  const std::vector<std::string> archs = c.strings("architectures");
  HfModel m;
  if (type == "llama" || type == "mistral" || type == "qwen2") m = detail::llama_from_config(c, type);
  else if (type == "gpt2") m = detail::gpt2_from_config(c);
  else if (type == "bert") m = detail::bert_from_config(c, archs);
  else if (type == "vit") m = detail::vit_from_config(c);
  else if (type == "t5") m = detail::t5_from_config(c, archs);
  else c.refuse("model_type '" + type + "' is not one ctgrad reads (gpt2, llama, mistral, qwen2, bert, vit, t5)");
  for (const std::string& a : archs)
    if (a != m.architecture)
      c.refuse("architectures names " + a + ": ctgrad reads a " + type + " folder as " + m.architecture + " (the language model)");
  if (c.has("pruned_heads") && !c.object("pruned_heads")->empty()) c.refuse("'pruned_heads' is not empty: pruned attention heads are not supported");
  c.known({"pruned_heads"});
  if (c.has("quantization_config")) c.refuse("'quantization_config': quantized checkpoints are not supported (ctgrad reads F32, F16 and BF16)");
  detail::known_metadata(c);
  c.finish(m.architecture);
  return m;
}

namespace {

detail::TensorSource source_of(const HfModel& m, const std::string& param) {
  if (m.is_vit()) return detail::vit_tensor(m, param);
  if (m.is_t5()) return detail::t5_tensor(param);
  return m.is_gpt() ? detail::gpt2_tensor(param) : m.is_bert() ? detail::bert_tensor(param) : detail::llama_tensor(param);
}
std::string canonical_of(const HfModel& m, const std::string& name) {
  return m.is_gpt() ? detail::gpt2_canonical(name) : m.is_bert() ? detail::bert_canonical(name) : name;
}
// A tensor of the folder's own task head (BERT's masked-LM and next-sentence heads, ViT's
// classifier): what a model with another head leaves unread.
bool folder_head(const HfModel& m, const std::string& canonical) {
  if (m.is_bert()) return canonical.rfind("cls.", 0) == 0;
  if (m.is_vit()) return canonical.rfind("classifier.", 0) == 0;
  return false;
}
bool ignores(const HfModel& m, const std::string& canonical) {
  if (m.is_vit()) return detail::vit_ignores(canonical);
  if (m.is_t5()) return detail::t5_ignores(m, canonical);
  return m.is_gpt() ? detail::gpt2_ignores(m, canonical) : m.is_bert() ? detail::bert_ignores(m, canonical) : detail::llama_ignores(m, canonical);
}

std::string shape_text(std::span<const std::int64_t> s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

LoadReport load_hf_weights(const fs::path& dir, const HfModel& m, std::span<const Parameter<float>> params,
                           const std::function<bool(std::string_view)>& head) {
  const checkpoint::TensorFolder folder(dir);
  const std::string where = "ctgrad: model folder " + dir.string();
  // The folder's names as the family writes them (GPT-2's with or without "transformer.").
  std::map<std::string, std::string> actual;
  for (const std::string& n : folder.names()) {
    const std::string canonical = canonical_of(m, n);
    if (!actual.emplace(canonical, n).second) throw format_error(where + ": holds both '" + n + "' and '" + actual[canonical] + "'");
  }
  // Everything is matched and checked before anything is read.
  struct Plan {
    const Parameter<float>* param;
    std::string name;
    bool transposed;
  };
  std::vector<Plan> plan;
  std::set<std::string> used;
  LoadReport report;
  for (const Parameter<float>& p : params) {
    const detail::TensorSource s = source_of(m, std::string(p.name));
    const auto it = actual.find(s.name);
    std::vector<std::int64_t> want(p.value.shape().begin(), p.value.shape().end());
    if (s.transposed) std::reverse(want.begin(), want.end());
    if (!s.shape.empty()) want = s.shape;
    if (head && head(p.name) && (it == actual.end() || folder.tensor(it->second).shape != want)) {  // a new head (another class count)
      report.fresh.emplace_back(p.name);
      continue;
    }
    if (it == actual.end())
      throw format_error(where + ": lacks tensor '" + s.name + "' (" + m.architecture + "'s " + std::string(p.name) + ", shape " +
                         shape_text(p.value.shape()) + ")");
    const checkpoint::TensorView& t = folder.tensor(it->second);
    if (t.shape != want)
      throw format_error(where + ": tensor '" + it->second + "' has shape " + shape_text(t.shape) + ", config.json makes it " + shape_text(want));
    used.insert(s.name);
    plan.push_back({&p, it->second, s.transposed});
  }
  for (const auto& [canonical, name] : actual) {
    if (used.count(canonical) || ignores(m, canonical)) continue;
    if (head && folder_head(m, canonical)) {
      ++report.unused;
      continue;
    }
    throw format_error(where + ": holds tensor '" + name + "', which " + m.architecture + " of this config.json has no place for");
  }
  report.loaded = int(plan.size());
  std::vector<float> scratch;
  for (const Plan& p : plan) {
    const auto shape = folder.tensor(p.name).shape;
    const std::span<float> out = p.param->value.span();
    if (!p.transposed) {
      folder.read_float(p.name, out, shape);
      continue;
    }
    scratch.resize(out.size());
    folder.read_float(p.name, scratch, shape);  // [rows, cols] stored; [cols, rows] wanted
    const std::int64_t rows = shape[0], cols = shape[1];
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) out[std::size_t(c * rows + r)] = scratch[std::size_t(r * cols + c)];
  }
  return report;
}

void save_hf_model(const fs::path& dir, const HfModel& m, std::span<const Parameter<float>> params) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) throw format_error("ctgrad: export: cannot make the folder " + dir.string() + (ec ? ": " + ec.message() : ""));
  std::vector<std::vector<float>> transposed;  // the Conv1D weights, [in, out]
  transposed.reserve(params.size());
  std::vector<checkpoint::TensorView> views;
  for (const Parameter<float>& p : params) {
    const detail::TensorSource s = source_of(m, std::string(p.name));
    std::vector<std::int64_t> shape(p.value.shape().begin(), p.value.shape().end());
    if (!s.transposed) {
      views.push_back(checkpoint::view_of<float>(s.name, p.value.span(), s.shape.empty() ? shape : s.shape));
      continue;
    }
    const std::int64_t rows = shape[0], cols = shape[1];
    std::vector<float>& t = transposed.emplace_back(p.value.span().size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) t[std::size_t(c * rows + r)] = p.value[r * cols + c];
    views.push_back(checkpoint::view_of<float>(s.name, std::span<const float>(t), {cols, rows}));
  }
  std::sort(views.begin(), views.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  checkpoint::save(dir / "model.safetensors", views, {{"format", "pt"}});
  const nlohmann::json j = m.is_gpt()    ? detail::gpt2_config_json(m)
                           : m.is_bert() ? detail::bert_config_json(m)
                           : m.is_vit()  ? detail::vit_config_json(m)
                           : m.is_t5()   ? detail::t5_config_json(m)
                                         : detail::llama_config_json(m);
  checkpoint::write_atomically(dir / "config.json", j.dump(2) + "\n");
}

}  // namespace ctgrad::pretrained
