// Hugging Face T5 folders (T5ForConditionalGeneration) for `train|eval|sample t5 --from DIR` and
// `finetune t5 --from DIR`: the keys a folder's model sets, and the folder a run exports as.
#include "t5_common.hpp"

namespace ctgrad::cli::t5 {

std::vector<std::pair<std::string, std::string>> hf_keys(const fs::path& dir, const pretrained::HfModel& m) {
  if (!m.is_t5()) throw config_error("the folder holds a " + m.architecture + ": ctgrad's t5 reads T5ForConditionalGeneration folders (" + command_reading(m) + ")");
  const models::T5Config& t = m.t5();
  if (t.pad != kPad) throw config_error("--from " + dir.string() + ": its pad_token_id is " + std::to_string(t.pad) + "; ctgrad's T5 pads with id 0");
  // The sentinels follow the SentencePiece pieces, as transformers' T5Tokenizer adds <extra_id_*>.
  const fs::path file = folder_tokenizer(dir);
  std::int32_t pieces = 0;
  try {
    pieces = data::SentencePieceTokenizer::load(file).vocab_size();
  } catch (const data::data_error& e) {
    throw config_error(message_of(e));
  }
  if (pieces + models::kT5Sentinels > t.vocab)
    throw config_error("--from " + dir.string() + ": " + file.filename().string() + " has " + std::to_string(pieces) + " pieces, which with the 100 sentinels exceed vocab_size " +
                       std::to_string(t.vocab));
  return {{"d_model", std::to_string(t.d_model)},
          {"layers", std::to_string(t.n_layer)},
          {"dec_layers", std::to_string(t.n_dec_layer)},
          {"heads", std::to_string(t.heads)},
          {"d_ff", std::to_string(t.d_ff)},
          {"vocab", std::to_string(t.vocab)},
          {"tied", t.tied ? "true" : "false"},
          {"ffn", t.ffn_act == layers::Act::relu ? "relu" : "gated_gelu"},
          {"buckets", std::to_string(t.buckets)},
          {"max_distance", std::to_string(t.max_distance)},
          {"sentinel_end", std::to_string(pieces + models::kT5Sentinels)},
          {"norm_eps", exact(m.hyper("norm_eps", 1e-6))}};
}

// A run's sentinels end where its pieces do plus 100 (its tokenizer was trained to vocab - 100
// pieces, or came from a folder with sentinel_end its pieces + 100): Hugging Face's convention.
void to_hf(const Config& c, const Context&, pretrained::HfModel& m) {
  m = pretrained::hf_model_of(t5_config(c), {{"norm_eps", c.real("norm_eps")}, {"dropout", c.real("dropout")}});
}

}  // namespace ctgrad::cli::t5
