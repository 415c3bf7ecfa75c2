// What each family of hf_model.hpp knows: its config.json fields and its tensor names. Internal.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/pretrained/hf_config.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

namespace ctgrad::pretrained::detail {

// Where a ctgrad parameter lives in a Hugging Face folder: the tensor's name there, and whether
// its two dims are swapped (GPT-2's Conv1D stores [in, out]; ctgrad's linear layers [out, in]).
struct TensorSource {
  std::string name;
  bool transposed = false;
  std::vector<std::int64_t> shape;  // Hugging Face's shape, when it is the parameter's reshaped (a conv kernel [d, C, p, p] for [d, C*p*p])
};

HfModel llama_from_config(HfConfig& c, const std::string& model_type);
nlohmann::json llama_config_json(const HfModel& m);
TensorSource llama_tensor(const std::string& param);
// A tensor of the folder the model has no place for and Hugging Face ignores too.
bool llama_ignores(const HfModel& m, const std::string& name);

HfModel gpt2_from_config(HfConfig& c);
nlohmann::json gpt2_config_json(const HfModel& m);
TensorSource gpt2_tensor(const std::string& param);
// A folder's name as Hugging Face's GPT2LMHeadModel writes it ("transformer." before the body's
// tensors; the original gpt2 checkpoints lack it).
std::string gpt2_canonical(const std::string& name);
bool gpt2_ignores(const HfModel& m, const std::string& canonical);

HfModel bert_from_config(HfConfig& c, const std::vector<std::string>& architectures);
nlohmann::json bert_config_json(const HfModel& m);
TensorSource bert_tensor(const std::string& param);
std::string bert_canonical(const std::string& name);  // the encoder under "bert." (BertModel folders lack it)
bool bert_ignores(const HfModel& m, const std::string& canonical);

HfModel vit_from_config(HfConfig& c);
nlohmann::json vit_config_json(const HfModel& m);
TensorSource vit_tensor(const HfModel& m, const std::string& param);
bool vit_ignores(const std::string& canonical);

HfModel t5_from_config(HfConfig& c, const std::vector<std::string>& architectures);
nlohmann::json t5_config_json(const HfModel& m);
TensorSource t5_tensor(const std::string& param);
bool t5_ignores(const HfModel& m, const std::string& canonical);

// Keys of every config.json that change no computation: token ids, dtype, versions, the
// generation defaults of `generate()`, labels.
void known_metadata(HfConfig& c);

}  // namespace ctgrad::pretrained::detail
