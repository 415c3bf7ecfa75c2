// What `ctgrad train t5` and `ctgrad finetune t5` share: the ids, the model and optimizer keys
// (Adafactor with T5's inverse-square-root schedule, or AdamW), the vocabulary, text with
// sentinels in and out, and the presets.
#pragma once
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <ctgrad/data/pairs.hpp>
#include <ctgrad/data/span_corruption.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/models/t5.hpp>
#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

#include "../task.hpp"
#include "text_corpus.hpp"

namespace ctgrad::cli::t5 {

namespace in = models::t5_inputs;
namespace fs = std::filesystem;

using training::Role;

// T5's SentencePiece ids: pad 0 (also the decoder's start), </s> 1, <unk> 2.
inline constexpr std::int32_t kPad = 0, kEos = 1, kUnk = 2;

// The hyperparameters of every T5: the tiny preset's graph, frozen at run time for the schema.
inline RuntimeGraph hyper_graph() { return freeze(models::t5(models::kT5Tiny)); }

// The keys that say which model: the preset, its sizes, the output's kind. `train t5` and
// `finetune t5` share them (a fine-tuning names its pretrained run's).
inline void add_model_keys(Schema& s) {
  s.choice("size", "small", {"tiny", "small", "t5-small"},
           "preset, a bundle of sizes any size key overrides: tiny (tests), small (minutes here), t5-small (the original T5-small's shape: 6+6 layers, "
           "d 512, 32k vocabulary)",
           Role::model)
      .flag("tied", false, "T5 v1.0's output: the shared embedding, the decoder output scaled by d^-1/2 (off: v1.1's untied lm_head)", Role::model);
  std::vector<PresetSizes> sizes;
  for (const auto& [n, p] : {std::pair{"tiny", models::kT5Tiny}, {"small", models::kT5Small}, {"t5-small", models::kT5SmallOriginal}})
    sizes.push_back({n, p.d_model, p.n_layer, p.d_ff / p.d_model, p.vocab});
  add_size_keys(s, sizes);
  s.integer("dec_layers", 0, {.min = 0, .max = 1024}, "architecture: the decoder's blocks (0: layers)", Role::model)
      .integer("heads", 0, {.min = 0, .max = 1024}, "architecture: attention heads (0: the preset's: tiny 2, small 4, t5-small 8)", Role::model)
      .choice("ffn", "gated_gelu", {"gated_gelu", "relu"}, "architecture: the feed-forward: v1.1's gated GELU, or v1.0's ReLU", Role::model)
      .integer("buckets", 32, {.min = 2, .max = 1 << 16}, "architecture: relative position buckets of each stack's bias", Role::model)
      .integer("max_distance", 128, {.min = 1, .max = 1 << 24}, "architecture: the distance from which positions share the last bucket", Role::model)
      .integer("sentinel_end", 0, {.min = 0, .max = 1 << 24},
               "the id after <extra_id_0> (the sentinels count down from it; 0: vocab; a Hugging Face T5's: its pieces + 100)", Role::model);
  s.stated_when_set({"dec_layers", "heads", "ffn", "buckets", "max_distance", "sentinel_end"});
}

// The config's model: a preset, its sizes overridden by the keys given. vocab counts the 100
// sentinels after the tokenizer's pieces.
inline models::T5Config t5_config(const Config& c) {
  const models::T5Config& p = c.text("size") == "tiny" ? models::kT5Tiny : c.text("size") == "t5-small" ? models::kT5SmallOriginal : models::kT5Small;
  models::T5Config m = p;
  m.d_model = size_or(c, "d_model", p.d_model), m.n_layer = size_or(c, "layers", p.n_layer), m.heads = size_or(c, "heads", p.heads);
  m.n_dec_layer = c.integer("dec_layers") ? int(c.integer("dec_layers")) : c.integer("layers") ? m.n_layer : p.n_dec_layer;
  m.d_ff = ff_width(c, m.d_model, p.d_ff / p.d_model, false), m.vocab = size_or(c, "vocab", p.vocab), m.tied = c.flag("tied");
  m.ffn_act = c.text("ffn") == "relu" ? layers::Act::relu : layers::Act::gated_gelu;
  m.buckets = int(c.integer("buckets")), m.max_distance = int(c.integer("max_distance"));
  if (m.buckets < 4 || m.buckets % 2 || m.max_distance <= m.buckets / 2)
    throw config_error("buckets " + c.show("buckets") + " and max_distance " + c.show("max_distance") +
                       ": the buckets must be even, at least 4, and max_distance more than half of them");
  if (m.vocab < models::kT5Sentinels + 64)
    throw config_error("vocab " + std::to_string(m.vocab) + " leaves fewer than 64 pieces beside T5's " + std::to_string(models::kT5Sentinels) + " sentinels");
  if (c.integer("sentinel_end") > m.vocab || (c.integer("sentinel_end") && c.integer("sentinel_end") < models::kT5Sentinels + 64))
    throw config_error("sentinel_end " + c.show("sentinel_end") + " must be within vocab " + std::to_string(m.vocab) + " and leave 64 pieces before the " +
                       std::to_string(models::kT5Sentinels) + " sentinels");
  check_heads(m.d_model, m.heads, m.heads, false);
  return m;
}

// The id after <extra_id_0>: <extra_id_i> is sentinel_end - 1 - i (vocab unless the key says).
inline int sentinel_end(const Config& c) { return c.integer("sentinel_end") ? int(c.integer("sentinel_end")) : t5_config(c).vocab; }

// --from DIR: a T5 folder's SentencePiece model (spiece.model as transformers names it, or
// tokenizer.model as ctgrad exports it); its tokenizer.json holds a Precompiled normalizer
// (SentencePiece's compiled character map), which the library does not read.
inline fs::path folder_tokenizer(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {"spiece.model", "tokenizer.model"})
    if (fs::is_regular_file(dir / name, ec)) return dir / name;
  throw config_error("--from " + dir.string() + ": the folder holds no SentencePiece spiece.model (nor tokenizer.model), which ctgrad's T5 reads");
}
// The keys a T5 folder's model sets (Task::from_hf): its sizes and, from its tokenizer, where the sentinels end.
std::vector<std::pair<std::string, std::string>> hf_keys(const fs::path& dir, const pretrained::HfModel& m);
// Task::to_hf of T5 runs.
void to_hf(const Config& c, const Context&, pretrained::HfModel& m);

// Greedy and beam search of a T5 over the weights given: its encoder and step graphs at run time.
inline std::unique_ptr<models::Seq2SeqSearch> t5_search(const models::T5Config& m, std::span<const Parameter<float>> weights, int threads) {
  const Options o{.threads = threads};
  return std::make_unique<models::Seq2SeqSearch>(program_maker([m] { return models::t5_encoder(m); })(o),
                                                 program_maker([m] { return models::t5_step(m); })(o),
                                                 models::Seq2SeqShape{m.n_dec_layer, m.heads, m.d_model / m.heads, m.vocab, false}, weights);
}

struct OptimizerKeys {
  std::string lr_help;
};
inline void add_optimizer_keys(Schema& s, const OptimizerKeys& k) {
  s.choice("optimizer", "adafactor", {"adafactor", "adamw"}, "Adafactor (T5's recipe) or AdamW", Role::run)
      .real("lr", 0, {.min = 0, .max = 10}, k.lr_help)
      .integer("warmup", 0, {.min = 0},
               "Adafactor: lr held for k steps, then lr sqrt(k / t) (0: T5's k = 10^4 in pretraining, a constant lr in fine-tuning); "
               "AdamW: linear warm-up steps (0: steps / 10)")
      .real("weight_decay", 0, {.min = 0, .max = 10}, "decoupled weight decay (not on norms and the relative biases); T5: none")
      .real("clip", 0, {.min = 0}, "global gradient-norm bound (0: none; Adafactor bounds its own update's RMS)");
}

inline double peak_lr(const Config& c) {
  if (c.real("lr") > 0) return c.real("lr");
  return c.text("optimizer") == "adafactor" ? 1e-2 : 1e-3;
}

// Adafactor: T5's 1/sqrt(max(t, k)), scaled so that the first k steps run at the peak (0.01 at
// k = 10^4, as the paper); k = warmup, or `default_k` when warmup is 0 (0: constant, as T5's
// fine-tuning). AdamW: linear warm-up (warmup, or steps / 10), then linear decay to 0 at `steps`.
inline optim::Schedule schedule(const Config& c, std::int64_t default_k) {
  const std::int64_t steps = c.integer("steps");
  if (c.text("optimizer") == "adafactor") {
    const std::int64_t k = c.integer("warmup") > 0 ? c.integer("warmup") : default_k;
    if (k == 0) return optim::constant(peak_lr(c));
    return optim::inverse_sqrt(k, peak_lr(c) * std::sqrt(double(k)));
  }
  return optim::warmup_linear(peak_lr(c), 0, c.integer("warmup") > 0 ? c.integer("warmup") : std::max<std::int64_t>(1, steps / 10), steps);
}

inline std::string describe_optimizer(const Config& c, std::int64_t default_k) {
  char buf[300];
  const long long k = c.integer("warmup") > 0 ? c.integer("warmup") : default_k;
  if (c.text("optimizer") == "adamw")
    std::snprintf(buf, sizeof buf, "AdamW lr %g (linear warm-up, then linear decay), weight decay %g", peak_lr(c), c.real("weight_decay"));
  else if (k == 0)
    std::snprintf(buf, sizeof buf, "Adafactor (factored second moments, update clipping 1.0, step scaled by each weight's RMS), constant lr %g", peak_lr(c));
  else
    std::snprintf(buf, sizeof buf,
                  "Adafactor (factored second moments, update clipping 1.0, step scaled by each weight's RMS), lr %g for %lld steps, then %g / sqrt(t)",
                  peak_lr(c), k, peak_lr(c) * std::sqrt(double(k)));
  return buf;
}

inline std::unique_ptr<optim::Optimizer<float>> make_optimizer(const Config& c, Executor<float>& model) {
  if (c.text("optimizer") == "adafactor")
    return std::make_unique<optim::Adafactor<float>>(
        model.parameters(), optim::AdafactorOptions{.lr = peak_lr(c), .relative_step = false, .weight_decay = c.real("weight_decay")},
        std::vector<optim::Group>{optim::no_decay_group({"rel_bias"})});
  return std::make_unique<optim::AdamW<float>>(model.parameters(), optim::AdamOptions{.lr = peak_lr(c), .weight_decay = c.real("weight_decay")},
                                               std::vector<optim::Group>{optim::no_decay_group({"rel_bias"})});
}

// One SentencePiece vocabulary for pretraining and every fine-tuning task, trained as T5's was on
// mostly English with some German (T5: 10 parts English C4 to 1 part each German, French,
// Romanian): the KJV and Austen training units, and the German side of the Ding dictionary's
// training split (so translating to German has pieces to write).
inline data::SentencePieceTokenizer train_tokenizer(const corpus::Corpus& text, const std::filesystem::path& prefix, std::int32_t pieces,
                                                    std::uint64_t seed, const data::DataCache& cache) {
  std::string all;
  for (const auto& u : text.train) all += u + "\n";
  for (const auto& p : data::split_pairs(data::ding_sentence_pairs()).train) all += p.de + "\n";
  return data::SentencePieceTokenizer::train(all, prefix,
                                             {.vocab_size = pieces, .model_type = "bpe", .seed = seed, .unk_id = kUnk, .bos_id = -1,
                                              .eos_id = kEos, .pad_id = kPad, .unk_piece = "<unk>", .pad_piece = "<pad>"},
                                             cache);
}

// The pieces of a T5 vocabulary (refused unless it is one and leaves room for the sentinels, which
// end at `end`).
inline std::int32_t check_vocabulary(const data::SentencePieceTokenizer& tok, int end, const std::filesystem::path& file) {
  const std::int32_t n = tok.vocab_size();
  if (n > end - models::kT5Sentinels || tok.pad_id() != kPad || tok.eos_id() != kEos)
    throw config_error(file.string() + " is not a T5 vocabulary for this model (pad 0, </s> 1, at most " +
                       std::to_string(end - models::kT5Sentinels) + " pieces before the sentinels)");
  return n;
}

inline std::int32_t sentinel_id(int i, int end) { return std::int32_t(end - 1 - i); }
inline bool is_sentinel(std::int32_t id, int end) { return id < end && id >= end - models::kT5Sentinels; }

// The text's ids, a sentinel <extra_id_N> where it is written. They must come in order from
// <extra_id_0>, as T5 numbers spans; `need_sentinel`: at least one.
inline std::vector<std::int32_t> encode_with_sentinels(const data::SentencePieceTokenizer& tok, const std::string& text, int end_id, bool need_sentinel) {
  static const std::regex kSentinel("<extra_id_([0-9]+)>");
  std::vector<std::int32_t> ids;
  int next = 0;
  std::size_t at = 0;
  auto add_text = [&](const std::string& s) {
    if (s.find_first_not_of(" ") == std::string::npos) return;
    try {
      for (std::int32_t id : tok.encode(s)) ids.push_back(id);
    } catch (const data::data_error& e) {
      throw config_error(std::string("the text: ") + e.what());
    }
  };
  for (std::sregex_iterator it(text.begin(), text.end(), kSentinel), end; it != end; ++it) {
    add_text(text.substr(at, std::size_t(it->position()) - at));
    const std::string n = (*it)[1].str();
    const long i = n.size() > 3 ? 1000 : std::stol(n);
    if (i >= models::kT5Sentinels)
      throw config_error("the text's " + it->str() + ": there are " + std::to_string(models::kT5Sentinels) + " sentinels, <extra_id_0> to <extra_id_" +
                         std::to_string(models::kT5Sentinels - 1) + ">");
    if (i != next)
      throw config_error("the text's sentinels are out of order: " + it->str() + " where <extra_id_" + std::to_string(next) +
                         "> comes next (T5 numbers the spans from <extra_id_0>, left to right)");
    ids.push_back(sentinel_id(next++, end_id));
    at = std::size_t(it->position() + it->length());
  }
  add_text(text.substr(at));
  if (need_sentinel && next == 0) throw config_error("the text has no sentinel to fill (<extra_id_0>, <extra_id_1>, ...): '" + text + "'");
  if (ids.empty()) throw config_error("the text is empty");
  ids.push_back(kEos);
  return ids;
}

// Ids to text, sentinels (ending at `end`) as <extra_id_N>, one space between a sentinel and the text beside it.
inline std::string decode(const data::SentencePieceTokenizer& tok, const std::vector<std::int32_t>& ids, int end) {
  std::vector<std::string> parts;
  std::vector<std::int32_t> run;
  auto flush = [&] {
    if (run.empty()) return;
    std::string t = tok.decode(run);
    run.clear();
    const std::size_t a = t.find_first_not_of(' ');
    if (a != std::string::npos) parts.push_back(t.substr(a, t.find_last_not_of(' ') + 1 - a));
  };
  for (std::int32_t id : ids) {
    if (is_sentinel(id, end)) {
      flush();
      parts.push_back("<extra_id_" + std::to_string(end - 1 - id) + ">");
    } else if (id >= tok.vocab_size()) {
      flush();
      parts.push_back("<unused>");
    } else if (id != kEos && id != kPad) {
      run.push_back(id);
    }
  }
  flush();
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

// A generated target ("<extra_id_0> span <extra_id_1> span ...") put into the text's sentinels.
struct Filled {
  std::string spans, text;
};
inline Filled fill_sentinels(const data::SentencePieceTokenizer& tok, const std::string& text, const std::vector<std::int32_t>& out, int end_id) {
  Filled f{decode(tok, out, end_id), ""};
  std::vector<std::string> span;
  std::vector<std::int32_t> cur;
  int open = -1;
  auto close = [&] {
    if (open >= 0) {
      span.resize(std::max<std::size_t>(span.size(), std::size_t(open) + 1));
      span[std::size_t(open)] = decode(tok, cur, end_id);
    }
    cur.clear();
  };
  for (std::int32_t id : out) {
    if (is_sentinel(id, end_id)) close(), open = end_id - 1 - id;
    else cur.push_back(id);
  }
  close();
  static const std::regex kSentinel("<extra_id_([0-9]+)>");
  std::size_t at = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), kSentinel), end; it != end; ++it) {
    f.text += text.substr(at, std::size_t(it->position()) - at);
    const std::size_t i = std::stoul((*it)[1].str());
    f.text += "[" + (i < span.size() ? span[i] : std::string()) + "]";
    at = std::size_t(it->position() + it->length());
  }
  f.text += text.substr(at);
  return f;
}

// The batches training steps 1..N draw and the validation batches (`val_count` sequences),
// exactly as a run feeds them, for another framework to train on (bench/reference/train_t5.py):
// each padded to the run's input and target lengths, [N, batch, length], with the rows each batch
// holds, written to --out (checked by the caller).
int export_span_batches(const Config& o, const Config& c, data::SpanCorruptionBatches& train, data::SpanCorruptionBatches& val,
                        std::int64_t val_count, std::int64_t batch, const data::SpanLengths& lengths, int vocab);

}  // namespace ctgrad::cli::t5
