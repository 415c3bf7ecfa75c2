#include "bert_finetune_init.hpp"

#include <algorithm>
#include <cstdio>

#include "bert_data.hpp"

namespace ctgrad::cli::bert {
namespace {
namespace fs = std::filesystem;

// The pretraining's topology must be ours (a post-norm checkpoint would load into a pre-norm graph
// by name but for its final norm), and positions past its context have untrained embeddings.
void check_pretrained_config(const Config& c, const std::string& json, const fs::path& file) {
  const auto bert = std::find_if(cli::tasks().begin(), cli::tasks().end(), [](const Task& t) { return t.name == "bert"; });
  if (bert == cli::tasks().end()) return;
  Config pre(bert->schema);
  pre.merge_json(json, "the config in " + file.string());
  // The model keys as given (a size key 0 is its preset's): each that differs is named with its --set.
  std::string sets;
  for (const char* k : {"size", "d_model", "layers", "heads", "d_ff", "vocab", "max_context", "pre_norm", "segments"})
    if (pre.show(k) != c.show(k)) sets += std::string(sets.empty() ? "" : " ") + "--set " + k + "=" + pre.show(k);
  if (!sets.empty()) throw config_error("pretrained " + file.string() + " was trained with another model: " + sets);
  if (const std::int64_t n = pre.integer("context"); c.integer("context") > n)
    throw config_error("context " + c.show("context") + " is longer than the pretrained run's " + std::to_string(n) +
                       " (its positions past that were never trained): --set context=" + std::to_string(n));
}
}  // namespace

std::vector<optim::Group> finetune_groups(const Config& c) {
  const std::int64_t freeze = c.integer("freeze");
  const double enc = c.real("encoder_lr");
  auto head = [](std::string_view n) { return n.rfind("pooler.", 0) == 0 || n.rfind("cls.", 0) == 0; };
  auto frozen = [freeze, head](std::string_view n) {
    if (freeze == 0 || head(n)) return false;
    if (n.rfind("layer.", 0) != 0) return true;  // tok, pos, seg, emb_norm
    return std::stoll(std::string(n.substr(6, n.find('.', 6) - 6))) < freeze - 1;
  };
  return {{"frozen", [frozen](const optim::ParamInfo& p) { return frozen(p.name); }, 0.0, 0.0},
          {"head_no_decay", [head](const optim::ParamInfo& p) { return p.rank < 2 && head(p.name); }, 1.0, 0.0},
          {"encoder_no_decay", [](const optim::ParamInfo& p) { return p.rank < 2; }, enc, 0.0},
          {"encoder", [head](const optim::ParamInfo& p) { return !head(p.name); }, enc, -1}};
}

data::SentencePieceTokenizer start_from_pretrained(const Config& c, Executor<float>& model, const fs::path& own) {
  const PretrainedRun from = open_pretrained(c.text("pretrained"), "bert", "ctgrad train bert --run");
  if (!from.config_json.empty()) check_pretrained_config(c, from.config_json, from.dir / "checkpoint.safetensors");
  data::SentencePieceTokenizer tok = data::SentencePieceTokenizer::load(from.tokenizer);
  if (c.text("init") == "scratch") {
    from.copy_tokenizer(own);
    return tok;
  }
  // The encoder, and the pooler when next-sentence prediction trained it; the output layer starts new.
  const bool pooler = from.checkpoint->has("pooler.weight");
  const int copied = from.load_weights(
      model, [pooler](std::string_view n) { return n.rfind("cls.", 0) != 0 && (pooler || n.rfind("pooler.", 0) != 0); },
      "this model's: was it pretrained at another size?");
  from.copy_tokenizer(own);
  std::printf("loaded %d encoder tensors from %s; %s\n", copied, (from.dir / "checkpoint.safetensors").c_str(),
              pooler ? "the pooler too (next-sentence prediction trained it); the output layer starts new"
                     : "the pooler and the output layer start new");
  return tok;
}

}  // namespace ctgrad::cli::bert
