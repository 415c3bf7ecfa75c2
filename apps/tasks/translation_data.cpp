// The translation session's data (translation_session.hpp): the sentence pairs encoded with the
// shared vocabulary, the batch of each step, the copy task's examples, and export-batches.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/en_de.hpp>
#include <ctgrad/data/pairs.hpp>
#include <ctgrad/base/random.hpp>

#include "../output_file.hpp"
#include <ctgrad/models/translation_inputs.hpp>

#include "translation_session.hpp"

namespace ctgrad::cli::translation {
namespace in = models::translation_inputs;

// The copy task: 1, then 9 symbols of 1..10; copy example n.
Example copy_example(std::uint64_t seed, std::uint64_t n) {
  Example e;
  e.src.push_back(1);
  for (int i = 1; i < 10; ++i) e.src.push_back(std::int32_t(1 + random::bits(random::key(seed, n, 17), std::uint64_t(i)) % 10));
  e.tgt = e.src;  // tgt_in = 1 x1..x8, tgt_out = x1..x9
  return e;
}

void feed(Executor<float>& model, const Batch& b) {
  model.set_input(in::src, std::span<const std::int32_t>(b.src), {b.B, b.S});
  model.set_input(in::src_len, std::span<const std::int32_t>(b.src_len), {b.B});
  model.set_input(in::tgt_in, std::span<const std::int32_t>(b.tgt_in), {b.B, b.T});
  model.set_input(in::tgt_len, std::span<const std::int32_t>(b.tgt_len), {b.B});
  model.set_input(in::tgt_out, std::span<const std::int32_t>(b.tgt_out), {b.B, b.T});
}

void TranslationSession::load_translation_data() {
  // The pairs (data/en_de.hpp): the dictionary's sentence pairs, or every pair of it split by
  // entry with phrases training too, and the game's dialogue, nothing of a held-out line training.
  const fs::path model_file = ctx_.folder.file("tokenizer.model");
  auto load_tokenizer = [&] {
    if (!fs::exists(model_file)) throw config_error("the tokenizer " + model_file.string() + " is missing");
    tok_ = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::load(model_file));
    if (tok_->vocab_size() != vocab_ || tok_->pad_id() != kPad || tok_->bos_id() != kBos || tok_->eos_id() != kEos)
      throw config_error("the tokenizer " + model_file.string() + " does not match the model (vocabulary " + std::to_string(tok_->vocab_size()) + ")");
  };
  if (ctx_.command == "translate") return load_tokenizer();  // the user's text, not the corpus
  data::EnDeCorpus corpus;
  try {
    corpus = data::en_de_corpus(c_.text("data"), {.source_field = c_.text("source_field"), .target_field = c_.text("target_field")});
  } catch (const data::data_error& e) {  // a user's pairs: bad input, one line
    throw config_error(message_of(e));
  }
  if (const double f = c_.real("train_fraction"); f < 1) {  // the same subset for every seed
    auto part = [f](std::size_t n) { return std::size_t(std::ceil(f * double(n))); };
    data::fixed_subset(corpus.train_sentences, part(corpus.train_sentences.size()), "train_fraction sentences");
    data::fixed_subset(corpus.train_phrases, part(corpus.train_phrases.size()), "train_fraction phrases");
  }
  const auto& train = corpus.train_sentences;
  dropped_ = corpus.dropped;
  const auto &phrases = corpus.train_phrases, &validation = corpus.validation, &test = corpus.test;
  if (!ctx_.from_checkpoint) {
    std::string text;  // one shared vocabulary for both languages, from the training sentences only
    for (const auto& p : train) text += p.en + "\n" + p.de + "\n";
    tok_ = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::train(
        text, ctx_.folder.file("tokenizer"),
        {.vocab_size = vocab_, .model_type = "bpe", .seed = seed_, .unk_id = 1, .bos_id = kBos, .eos_id = kEos, .pad_id = kPad},
        ctx_.cache));
    if (tok_->vocab_size() != vocab_ || tok_->pad_id() != kPad || tok_->bos_id() != kBos || tok_->eos_id() != kEos)
      throw config_error("the tokenizer trained does not match the model (vocabulary " + std::to_string(tok_->vocab_size()) + ")");
  } else {
    load_tokenizer();
  }
  auto encode = [&](const std::vector<data::SentencePair>& pairs, bool drop_long) {
    std::vector<Example> out;
    std::vector<std::string> en, de;
    for (const auto& p : pairs) en.push_back(p.en), de.push_back(p.de);
    std::vector<std::vector<std::int32_t>> src, tgt;
    model_->execute([&] { src = tok_->encode_all(en, ctx_.cache), tgt = tok_->encode_all(de, ctx_.cache); });
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const auto& p = pairs[i];
      Example e;
      e.src = std::move(src[i]);
      e.tgt = std::move(tgt[i]);
      if (drop_long && (std::int64_t(e.src.size()) >= max_len_ || std::int64_t(e.tgt.size()) >= max_len_)) continue;
      if (std::int64_t(e.src.size()) >= max_len_) e.src.resize(std::size_t(max_len_ - 1));
      e.src.push_back(kEos);
      e.tgt.insert(e.tgt.begin(), kBos);
      e.tgt.push_back(kEos);
      e.src_text = p.en, e.tgt_text = p.de;
      out.push_back(std::move(e));
    }
    return out;
  };
  val_ = encode(validation, true);
  if (val_.empty()) throw config_error("no validation sentence pair fits in max_len " + c_.show("max_len") + " tokens: raise --set max_len");
  test_ = encode(test, false);  // every test sentence counts for BLEU
  for (const data::NamedPairs& t : corpus.other_tests) other_tests_.emplace_back(t.name, encode(t.pairs, false));
  if (ctx_.command != "train" && ctx_.command != "export-batches") return;  // the training pairs: for training only
  train_ = encode(train, true);
  sentences_ = std::int64_t(train_.size());
  for (auto& e : encode(phrases, true)) train_.push_back(std::move(e));
  if (sentences_ == 0)
    throw config_error("no training sentence pair fits in max_len " + c_.show("max_len") + " tokens: raise --set max_len");
}

// The run's training batches of steps 1..N (as train feeds them), its validation batches (as
// validation_nll makes them) and the test sources, for another framework to train and decode
// the same (bench/reference/train_transformer.py); the test references beside, one per line.
int TranslationSession::export_batches(const Config& o) {
  check_output_file(o.text("out"), "--out", o.flag("overwrite"), ctx_.folder);
  check_output_file(o.text("out") + ".test.de", "--out", o.flag("overwrite"), ctx_.folder);  // the references beside it
  if (copy_) throw config_error("export-batches exports a translation run (this run is the copy task)");
  struct Set {
    std::vector<std::int32_t> src, src_len, tgt_in, tgt_out, tgt_len, shapes;  // shapes: B, S, T per batch
    void add(const Batch& b) {
      src.insert(src.end(), b.src.begin(), b.src.end());
      src_len.insert(src_len.end(), b.src_len.begin(), b.src_len.end());
      tgt_in.insert(tgt_in.end(), b.tgt_in.begin(), b.tgt_in.end());
      tgt_out.insert(tgt_out.end(), b.tgt_out.begin(), b.tgt_out.end());
      tgt_len.insert(tgt_len.end(), b.tgt_len.begin(), b.tgt_len.end());
      shapes.insert(shapes.end(), {std::int32_t(b.B), std::int32_t(b.S), std::int32_t(b.T)});
    }
  } train, val;
  const std::int64_t steps = o.integer("steps");
  for (std::int64_t step = 1; step <= steps && !training::interrupted(); ++step) train.add(make_batch(train_, training_batch(step), kPad));
  std::vector<std::int64_t> idx;
  for (std::int64_t i = 0; i < std::int64_t(val_.size()); ++i) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](auto x, auto y) { return val_[std::size_t(x)].src.size() < val_[std::size_t(y)].src.size(); });
  for (std::size_t b = 0; b < idx.size(); b += std::size_t(batch_))
    val.add(make_batch(val_, std::span<const std::int64_t>(idx).subspan(b, std::min(idx.size() - b, std::size_t(batch_))), kPad));
  std::vector<std::int32_t> test_src, test_offsets{0};
  std::string refs;
  for (const Example& e : test_) {
    test_src.insert(test_src.end(), e.src.begin(), e.src.end());
    test_offsets.push_back(std::int32_t(test_src.size()));
    refs += e.tgt_text + "\n";
  }
  if (training::interrupted()) return 130;
  std::vector<checkpoint::TensorView> t;
  for (auto [name, set] : {std::pair{"train", &train}, std::pair{"val", &val}}) {
    const std::string p(name);
    const std::int64_t n = std::int64_t(set->shapes.size() / 3);
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".shapes", set->shapes, {n, 3}));
    for (auto [field, v] : {std::pair{".src", &set->src}, std::pair{".src_len", &set->src_len}, std::pair{".tgt_in", &set->tgt_in},
                            std::pair{".tgt_out", &set->tgt_out}, std::pair{".tgt_len", &set->tgt_len}})
      t.push_back(checkpoint::view_of<std::int32_t>(p + field, *v, {std::int64_t(v->size())}));
  }
  t.push_back(checkpoint::view_of<std::int32_t>("test.src", test_src, {std::int64_t(test_src.size())}));
  t.push_back(checkpoint::view_of<std::int32_t>("test.offsets", test_offsets, {std::int64_t(test_offsets.size())}));
  const std::string out = o.text("out");
  checkpoint::save(out, t, {{"config", c_.to_json()}, {"vocab", std::to_string(vocab_)}, {"d_model", std::to_string(m_.width)}});
  checkpoint::write_atomically(out + ".test.de", refs);
  std::printf("wrote %s: %lld training batches, %zu validation batches, %zu test sources (references: %s.test.de)\n", out.c_str(),
              (long long)steps, val.shapes.size() / 3, test_.size(), out.c_str());
  return 0;
}

// The examples of epoch e: every sentence pair, and phrase_weight as many dictionary phrases,
// the next ones of a fixed shuffle of them (each phrase comes once before any comes twice).
std::vector<std::int64_t> TranslationSession::epoch_members(std::uint64_t e) const {
  std::vector<std::int64_t> m(static_cast<std::size_t>(sentences_));
  for (std::int64_t i = 0; i < sentences_; ++i) m[std::size_t(i)] = i;
  const std::int64_t phrases = std::int64_t(train_.size()) - sentences_;
  const std::int64_t take = std::min(phrases, std::int64_t(std::llround(c_.real("phrase_weight") * double(sentences_))));
  if (phrases > 0 && take > 0) {
    if (phrase_order_.empty()) phrase_order_ = data::shuffled(phrases, seed_ ^ 0x7068726173ull, 0);
    for (std::int64_t k = 0; k < take; ++k) m.push_back(sentences_ + phrase_order_[std::size_t((std::int64_t(e) * take + k) % phrases)]);
  }
  return m;
}

// The batch of step s (1-based): epochs in order, each epoch's batches in order; a function of
// s alone, so a resumed run continues with the same batches.
// This rank's rows of a batch's rows (all of them in one process).
std::vector<std::int64_t> TranslationSession::shard_of(std::span<const std::int64_t> rows) const {
  const std::int64_t n = std::int64_t(rows.size());
  if (ctx_.shard.rows(n) == 0)
    throw std::runtime_error("a batch of " + std::to_string(n) + " pairs has none for rank " + std::to_string(ctx_.shard.index) +
                             " of " + std::to_string(ctx_.shard.count) + ": raise batch_tokens or use fewer ranks");
  return {rows.begin() + ctx_.shard.begin(n), rows.begin() + ctx_.shard.end(n)};
}

std::span<const std::int64_t> TranslationSession::training_batch(std::int64_t step) {
  std::int64_t first = 1;  // the first step of epoch e
  for (std::uint64_t e = 0;; ++e) {
    if (epoch_sizes_.size() <= e) {
      const auto members = epoch_members(e);
      epoch_sizes_.push_back(std::int64_t(data::epoch_batches(train_, members, batch_, c_.integer("batch_tokens"), seed_, e).size()));
    }
    if (epoch_sizes_[e] == 0) throw std::runtime_error("epoch " + std::to_string(e) + " has no training batch");
    if (step < first + epoch_sizes_[e]) {
      if (e != epoch_no_) {
        const auto members = epoch_members(e);
        epoch_ = data::epoch_batches(train_, members, batch_, c_.integer("batch_tokens"), seed_, e), epoch_no_ = e;
      }
      return epoch_[std::size_t(step - first)];
    }
    first += epoch_sizes_[e];
  }
}

}  // namespace ctgrad::cli::translation
