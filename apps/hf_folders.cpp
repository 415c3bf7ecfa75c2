// Hugging Face model folders in the command: --from DIR's config keys and memory check (used by
// apps/ctgrad.cpp), and
// ctgrad export --run DIR --to OUT [--checkpoint FILE] [--overwrite]
// A run's model as a Hugging Face model folder (docs/models/pretrained.md): config.json and
// model.safetensors as transformers writes them for the family's class (GPT2LMHeadModel,
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, BertForMaskedLM, BertForPreTraining,
// ViTForImageClassification, T5ForConditionalGeneration), and the run's tokenizer: a Hugging
// Face tokenizer.json as it is, ctgrad's character vocabulary converted to one (the same ids),
// a SentencePiece model copied as tokenizer.model (a T5's as spiece.model: what transformers'
// slow tokenizers read).
// OUT must be new or empty (or --overwrite, which replaces only the files export writes).
#include <cstdio>
#include <fstream>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/checkpoint/tensor_folder.hpp>
#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/data/hf_tokenizer.hpp>
#include <ctgrad/pretrained/hf_model.hpp>
#include <ctgrad/training/escape.hpp>

#include "option_text.hpp"
#include "plugins.hpp"
#include "saved_config.hpp"
#include "task.hpp"

namespace ctgrad::cli {

namespace fs = std::filesystem;

// The config keys a Hugging Face model folder sets (Task::from_hf), from its config.json.
std::vector<std::pair<std::string, std::string>> folder_keys(const Task& t, const std::filesystem::path& dir) {
  if (!pretrained::is_hf_folder(dir))
    throw config_error("--from " + dir.string() + ": not a Hugging Face model folder (no config.json; docs/models/pretrained.md says what it holds)");
  return t.from_hf(dir, pretrained::read_hf_model(dir));
}

// A model folder's parameters, held as float with their gradients, must fit in memory: checked
// from the tensor headers before the model is built (a config.json of sizes its tensors do not
// have is refused by name when the weights are matched).
void check_folder_fits(const std::filesystem::path& dir) {
  const checkpoint::TensorFolder folder(dir);
  double values = 0;
  for (const std::string& n : folder.names()) {
    double count = 1;
    for (const std::int64_t d : folder.tensor(n).shape) count *= double(d);
    values += count;
  }
  if (8 * values > available_bytes())
    throw config_error("--from " + dir.string() + ": its " + std::to_string(std::int64_t(values / 1e6)) + "M parameters need " +
                       std::to_string(std::int64_t(8 * values / 1e9)) + " GB as float with their gradients, more than the " +
                       std::to_string(std::int64_t(available_bytes() / 1e9)) + " GB this machine has free");
}

int export_model(const std::vector<std::string>& rest) {
  std::string dir, out, checkpoint_name;
  bool overwrite = false;
  for (std::size_t i = 1; i < rest.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= rest.size()) throw config_error(rest[i] + " needs a value");
      return rest[++i];
    };
    const std::string& o = rest[i];
    if (o == "--run") dir = one_line(o, value());
    else if (o == "--to") out = one_line(o, value());
    else if (o == "--checkpoint") checkpoint_name = one_line(o, value());
    else if (o == "--overwrite") overwrite = true;
    else throw config_error("unknown option '" + training::printable(o) + "' for ctgrad export (options: --run, --to, --checkpoint, --overwrite)");
  }
  if (dir.empty() || out.empty()) throw config_error("usage: ctgrad export --run DIR --to OUT [--checkpoint FILE] [--overwrite]");
  training::RunFolder folder(dir);
  if (!checkpoint_name.empty())
    folder.use_checkpoint(checkpoint_name.find('/') == std::string::npos ? folder.file(checkpoint_name) : fs::path(checkpoint_name));
  folder.require_checkpoint();
  const checkpoint::File file(folder.checkpoint(), checkpoint::OnDemand{});  // its metadata (load_training reads the weights)
  const auto meta = [&](const char* key) {
    const auto it = file.metadata().find(key);
    return it == file.metadata().end() ? std::string() : it->second;
  };
  const std::string model = meta("model");
  const Task* task = nullptr;
  for (const Task& t : tasks())
    if (t.name == model) task = &t;
  if (!task) throw config_error(folder.checkpoint().string() + " is a checkpoint of model '" + training::printable(model) + "', which this ctgrad does not have");
  if (!task->to_hf) {
    std::string list;
    for (const Task& t : tasks())
      if (t.to_hf) list += (list.empty() ? "" : ", ") + t.name;
    throw config_error("ctgrad export writes Hugging Face folders of " + list + "; " + model + " is not one of them yet");
  }
  // The output folder: new, or empty, or (--overwrite) one whose export files are replaced.
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) throw config_error("--to " + out + " is a file, not a folder");
  if (fs::is_directory(out, ec) && !fs::is_empty(out, ec) && !overwrite)
    throw config_error("--to " + out + " is not empty: give a new folder (or --overwrite to replace its config.json, model.safetensors and tokenizer)");
  if (fs::equivalent(out, dir, ec)) throw config_error("--to " + out + " is the run folder: give another folder");

  // --overwrite: what a previous export wrote goes first (a stale index or tokenizer would be read instead of the new files).
  if (overwrite && fs::is_directory(out, ec))
    for (const auto& entry : fs::directory_iterator(out, ec)) {
      const std::string n = entry.path().filename().string();
      if (n == "config.json" || n == "tokenizer.json" || n == "tokenizer.model" || n == "spiece.model" || n == "model.safetensors.index.json" ||
          (n.rfind("model", 0) == 0 && entry.path().extension() == ".safetensors"))
        fs::remove(entry.path(), ec);
    }
  const Config cfg = saved_config(*task, folder.checkpoint());
  const Context ctx{"export", folder, true};
  const std::unique_ptr<Session> session = task->open(cfg, ctx);
  checkpoint::load_training<float>(folder.checkpoint(), session->model(), &session->optimizer());
  pretrained::HfModel hf;
  task->to_hf(cfg, ctx, hf);
  pretrained::save_hf_model(out, hf, session->model().parameters());

  // The tokenizer the run was trained with (its hash checked, as eval does).
  std::string tokenizer_note = "no tokenizer (the run has none)";
  if (const std::string name = meta("tokenizer"); !name.empty()) {
    const fs::path source = folder.file(name);
    if (name.find('/') != std::string::npos || !fs::is_regular_file(source, ec)) throw config_error("the run's tokenizer " + source.string() + " is missing");
    if (file_hash(source) != meta("tokenizer_hash"))
      throw config_error("the tokenizer " + source.string() + " is not the one the checkpoint was trained with (its hash differs)");
    if (name == "tokenizer.json" && !data::is_hf_tokenizer_file(source)) {
      checkpoint::write_atomically(fs::path(out) / "tokenizer.json", data::hf_tokenizer_json(data::CharTokenizer::load(source)));
      tokenizer_note = "tokenizer.json (the character vocabulary as a byte-level BPE without merges)";
    } else {  // a T5's SentencePiece model under the name transformers' T5Tokenizer reads
      const std::string as = hf.is_t5() && name == "tokenizer.model" ? "spiece.model" : name;
      std::ifstream in(source, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      checkpoint::write_atomically(fs::path(out) / as, bytes);
      tokenizer_note = as;
    }
  }
  std::printf("exported %s (%s, %lld parameters) to %s: config.json, model.safetensors, %s\n", folder.checkpoint().c_str(), hf.architecture.c_str(),
              (long long)session->model().parameter_count(), out.c_str(), tokenizer_note.c_str());
  return 0;
}

}  // namespace ctgrad::cli
