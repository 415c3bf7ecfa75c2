// Hugging Face model folders in and out (docs/models/pretrained.md). A folder holds config.json,
// model.safetensors (or model.safetensors.index.json and its shards) and usually tokenizer.json.
//   read_hf_model(dir)        config.json -> the family and its ctgrad config (unknown or
//                             unsupported fields refused by name)
//   load_hf_weights(m, ps)    every parameter of a program of that config, matched by name and
//                             shape (GPT-2's Conv1D weights transposed), F32/F16/BF16 converted;
//                             a missing, extra or misshapen tensor refused naming it
//   save_hf_model(dir, m, ps) config.json and model.safetensors as Hugging Face writes them
// Families: GPT-2 (GPT2LMHeadModel), Llama (LlamaForCausalLM; MistralForCausalLM and
// Qwen2ForCausalLM, which differ only in config: a sliding window, q/k/v biases), BERT
// (BertForMaskedLM, BertForPreTraining: ctgrad's bert_mlm graph, with next-sentence prediction),
// ViT (ViTForImageClassification: ctgrad's vit graph), T5 (T5ForConditionalGeneration, v1.0 and
// v1.1: ctgrad's t5 graph).
#pragma once
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <ctgrad/graph/tensor.hpp>
#include <ctgrad/models/bert_config.hpp>
#include <ctgrad/models/gpt_config.hpp>
#include <ctgrad/models/llama_config.hpp>
#include <ctgrad/models/t5_config.hpp>
#include <ctgrad/models/vit_config.hpp>

namespace ctgrad::pretrained {

struct HfModel {
  std::string architecture;  // "LlamaForCausalLM"
  std::string model_type;    // "llama"
  std::variant<models::GptConfig, models::LlamaConfig, models::BertConfig, models::VitConfig, models::T5Config> config;
  // The graph's hyperparameters the config sets (norm_eps; dropout for fine-tuning).
  std::vector<std::pair<std::string, double>> hypers;
  // A classifier's class names (ViT's id2label), output k's at k; empty: LABEL_k.
  std::vector<std::string> labels;
  bool is_gpt() const { return std::holds_alternative<models::GptConfig>(config); }
  const models::GptConfig& gpt() const { return std::get<models::GptConfig>(config); }
  const models::LlamaConfig& llama() const { return std::get<models::LlamaConfig>(config); }
  bool is_llama() const { return std::holds_alternative<models::LlamaConfig>(config); }
  bool is_bert() const { return std::holds_alternative<models::BertConfig>(config); }
  const models::BertConfig& bert() const { return std::get<models::BertConfig>(config); }
  bool is_vit() const { return std::holds_alternative<models::VitConfig>(config); }
  const models::VitConfig& vit() const { return std::get<models::VitConfig>(config); }
  bool is_t5() const { return std::holds_alternative<models::T5Config>(config); }
  const models::T5Config& t5() const { return std::get<models::T5Config>(config); }
  double hyper(const std::string& name, double fallback) const;
};

// Whether `dir` looks like a Hugging Face model folder (holds a config.json).
bool is_hf_folder(const std::filesystem::path& dir);

HfModel read_hf_model(const std::filesystem::path& dir);

// The model a ctgrad config describes, for export; refuses, naming it, what Hugging Face's class
// of the family cannot express (a mixture of experts, interleaved RoPE pairs, ...).
HfModel hf_model_of(const models::GptConfig& c, std::vector<std::pair<std::string, double>> hypers);
HfModel hf_model_of(const models::LlamaConfig& c, std::vector<std::pair<std::string, double>> hypers);
HfModel hf_model_of(const models::BertConfig& c, std::vector<std::pair<std::string, double>> hypers);
HfModel hf_model_of(const models::VitConfig& c, std::vector<std::pair<std::string, double>> hypers);
HfModel hf_model_of(const models::T5Config& c, std::vector<std::pair<std::string, double>> hypers);

// What load_hf_weights did: the tensors it read, the parameters that start new (a task's head the
// folder lacks), and how many of the folder's tensors nothing read (its pretraining head).
struct LoadReport {
  int loaded = 0;
  std::vector<std::string> fresh;
  int unused = 0;
};

// Loads every parameter from the folder's tensors, read one at a time into place (the file is
// never held whole: peak memory is the parameters plus one tensor). `head`: the parameters of a
// task's own head (a classifier fine-tuned from BERT or ViT), read when the folder has their
// tensors at their shape and left as initialised otherwise; with a head, the tensors of the
// folder's own head (BERT's masked-LM and next-sentence heads, ViT's classifier) are left unread,
// as transformers' from_pretrained does for a model with another head; any other tensor without
// a place is refused.
LoadReport load_hf_weights(const std::filesystem::path& dir, const HfModel& m, std::span<const Parameter<float>> params,
                           const std::function<bool(std::string_view)>& head = {});

// Writes config.json and model.safetensors (F32) into `dir` (made if missing; files replaced atomically).
void save_hf_model(const std::filesystem::path& dir, const HfModel& m, std::span<const Parameter<float>> params);

}  // namespace ctgrad::pretrained
