// The BERT task's validation, fill-mask and export-batches (bert_session.hpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <ctgrad/checkpoint/safetensors.hpp>

#include "../output_file.hpp"
#include "bert_session.hpp"

namespace ctgrad::cli::bert {

// Predicting every masked token from the training split's token frequencies alone.
BertSession::Baseline BertSession::unigram_baseline() {
  std::int64_t total = 0;
  std::int32_t best = specials_.first_regular;
  for (std::int32_t t = specials_.first_regular; t < vocab_; ++t) {
    total += unigram_[std::size_t(t)] + 1;  // add-one smoothing: no token has probability 0
    if (unigram_[std::size_t(t)] > unigram_[std::size_t(best)]) best = t;
  }
  double loss = 0;
  std::int64_t n = 0, right = 0;
  for (std::int64_t first = 0; first < std::int64_t(val_seqs_.size()); first += batch_) {
    val_->rows(first, std::min<std::int64_t>(batch_, std::int64_t(val_seqs_.size()) - first));
    for (std::int32_t t : val_->targets()) {
      loss -= std::log(double(unigram_[std::size_t(t)] + 1) / double(total));
      right += t == best, ++n;
    }
  }
  return {loss / double(std::max<std::int64_t>(n, 1)), double(right) / double(std::max<std::int64_t>(n, 1)), best};
}

// The batch, or a data-parallel rank's rows of it (the batch's padded length kept, so each
// rank's dropout masks are its rows' of the whole batch) with the picks in them.
void BertSession::set_batch(const data::MlmBatches& b, training::Shard shard) {
  const std::int64_t seq = b.seq(), first = shard.begin(b.batch()), rows = shard.rows(b.batch());
  const std::size_t lo = std::size_t(first * seq), n = std::size_t(rows * seq);
  shard_picks_ = 0, picks_.clear(), targets_.clear();
  for (std::size_t i = 0; i < b.picks().size(); ++i)
    if (std::size_t(b.picks()[i]) >= lo && std::size_t(b.picks()[i]) < lo + n)
      picks_.push_back(b.picks()[i] - std::int32_t(lo)), targets_.push_back(b.targets()[i]);
  shard_picks_ = std::int64_t(picks_.size());
  model_->set_input(in::ids, b.ids().subspan(lo, n), {rows, seq});
  model_->set_input(in::segments, b.segments().subspan(lo, n), {rows, seq});
  model_->set_input(in::lengths, b.lengths().subspan(std::size_t(first), std::size_t(rows)), {rows});
  model_->set_input(in::picks, std::span<const std::int32_t>(picks_), {shard_picks_});
  model_->set_input(in::targets, std::span<const std::int32_t>(targets_), {shard_picks_});
  if (p_.next_sentence) model_->set_input(in::labels, b.next_labels().subspan(std::size_t(first), std::size_t(rows)), {rows});
}

// MLM loss (per masked token) and masked-token accuracy over the validation sequences, with
// their fixed masks (and pairs); with next-sentence prediction, its accuracy too.
BertSession::Scores BertSession::validate() {
  double loss = 0;
  std::int64_t n = 0, right = 0;
  std::array<std::int64_t, 2> nsp_rows{}, nsp_right{};
  const EvalShard shard{ctx_.comm};
  for (std::int64_t first = 0; first < std::int64_t(val_seqs_.size()) && !training::interrupted(); first += batch_) {
    if (!shard.mine(first / batch_)) continue;
    val_->rows(first, std::min<std::int64_t>(batch_, std::int64_t(val_seqs_.size()) - first));
    set_batch(*val_);
    model_->forward(Mode::infer);
    const std::int64_t picks = std::int64_t(val_->picks().size());
    const auto logits = model_->output("logits");
    for (std::int64_t k = 0; k < picks; ++k) {  // -log softmax at the target (the loss may add NSP, smoothing)
      const float* row = logits.data + k * p_.vocab;
      const std::int32_t target = val_->targets()[std::size_t(k)];
      loss += token_nll(row, p_.vocab, target);
      right += std::max_element(row, row + vocab_) - row == target;
    }
    n += picks;
    if (p_.next_sentence) {
      const auto nsp = model_->output("nsp_logits");
      for (std::int64_t b = 0; b < val_->batch(); ++b) {
        const int label = val_->next_labels()[std::size_t(b)] == 1;
        nsp_right[std::size_t(label)] += (nsp.data[2 * b + 1] > nsp.data[2 * b]) == (label == 1), ++nsp_rows[std::size_t(label)];
      }
    }
  }
  if (shard.comm) {  // the ranks' counts and sums, added (exact: whole numbers, and the loss's order is all that differs)
    double sums[7] = {loss, double(n), double(right), double(nsp_rows[0]), double(nsp_rows[1]), double(nsp_right[0]), double(nsp_right[1])};
    shard.sum(sums);
    loss = sums[0], n = std::int64_t(sums[1]), right = std::int64_t(sums[2]);
    nsp_rows = {std::int64_t(sums[3]), std::int64_t(sums[4])}, nsp_right = {std::int64_t(sums[5]), std::int64_t(sums[6])};
  }
  return {loss / double(std::max<std::int64_t>(n, 1)), double(right) / double(std::max<std::int64_t>(n, 1)),
          // balanced: the validation pairs are not half "next" (a kept sequence's continuation is
          // kept, the continuation's own is not), so the mean of the two classes' accuracies
          (nsp_rows[0] && nsp_rows[1]) ? 0.5 * (double(nsp_right[0]) / double(nsp_rows[0]) + double(nsp_right[1]) / double(nsp_rows[1]))
                                       : double(nsp_right[0] + nsp_right[1]) / double(std::max<std::int64_t>(nsp_rows[0] + nsp_rows[1], 1))};
}

// The user's text with its m-th [MASK] replaced by a piece (the others kept): a word-start piece
// ("▁heaven") is a new word, any other ("," "s") joins the text before it.
std::string BertSession::filled_text(const std::string& text, std::size_t m, const std::string& piece, bool new_word) {
  static const std::string kMask = "[MASK]";
  std::size_t at = text.find(kMask);
  for (std::size_t i = 0; i < m && at != std::string::npos; ++i) at = text.find(kMask, at + kMask.size());
  if (at == std::string::npos) return piece;  // the mask came from another spelling the tokenizer normalised
  std::string before = text.substr(0, at);
  const std::string after = text.substr(at + kMask.size());
  if (new_word) {
    if (!before.empty() && before.back() != ' ') before += ' ';
    return before + piece + after;
  }
  while (!before.empty() && before.back() == ' ') before.pop_back();
  return before + piece + after;
}

// The Hugging Face fill-mask pipeline's output: for each [MASK], the top-k tokens with their
// probabilities and the text with each filled in.
int BertSession::fill_mask(const Config& o) {
  std::vector<std::int32_t> ids{specials_.cls};
  try {
    // SentencePiece reads " [MASK]" as a bare word-start piece and the symbol; in training a mask
    // replaces a whole piece ("▁the"), so the bare "▁" before a mask is dropped: the model sees
    // what it was trained on, and a candidate brings its own space.
    const auto t = tok_->encode(o.text("text"));
    for (std::size_t i = 0; i < t.size(); ++i)
      if (!(i + 1 < t.size() && t[i + 1] == specials_.mask && tok_->piece(t[i]) == "\xe2\x96\x81")) ids.push_back(t[i]);
  } catch (const data::data_error& e) {
    throw config_error(std::string("--text: ") + e.what());
  }
  ids.push_back(specials_.sep);
  std::vector<std::int32_t> picks;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == specials_.mask) picks.push_back(std::int32_t(i));
  if (picks.empty()) throw config_error("--text has no [MASK] to fill: '" + o.text("text") + "'");
  const std::int64_t seq = std::int64_t(ids.size());
  if (seq > context_)  // positions past the trained context have untrained embeddings
    throw config_error("--text is " + std::to_string(seq) + " tokens with [CLS] and [SEP], more than the model's context of " + std::to_string(context_));
  std::vector<std::int32_t> segments(ids.size(), 0), lengths{std::int32_t(seq)}, targets(picks.size(), specials_.mask);
  model_->set_input(in::ids, std::span<const std::int32_t>(ids), {1, seq});
  model_->set_input(in::segments, std::span<const std::int32_t>(segments), {1, seq});
  model_->set_input(in::lengths, std::span<const std::int32_t>(lengths), {1});
  model_->set_input(in::picks, std::span<const std::int32_t>(picks), {std::int64_t(picks.size())});
  model_->set_input(in::targets, std::span<const std::int32_t>(targets), {std::int64_t(picks.size())});
  const std::vector<std::int32_t> no_pair{0};
  if (p_.next_sentence) model_->set_input(in::labels, std::span<const std::int32_t>(no_pair), {1});  // unused
  model_->forward(Mode::infer);
  const auto logits = model_->output("logits");
  const int k = int(std::min<std::int64_t>(o.integer("top-k"), vocab_ - specials_.first_regular));
  for (std::size_t m = 0; m < picks.size(); ++m) {
    const float* row = logits.data + std::int64_t(m) * p_.vocab;
    const float top = *std::max_element(row, row + vocab_);
    double z = 0;
    for (std::int32_t t = 0; t < vocab_; ++t) z += std::exp(double(row[t] - top));
    std::vector<std::int32_t> order(std::size_t(vocab_ - specials_.first_regular));
    std::iota(order.begin(), order.end(), specials_.first_regular);  // specials are never an answer
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int32_t a, std::int32_t b) { return row[a] > row[b]; });
    std::printf("[MASK] %zu of %zu:\n", m + 1, picks.size());
    for (int j = 0; j < k; ++j) {
      const std::string piece = tok_->piece(order[std::size_t(j)]);
      std::size_t width = 0;  // in characters, not bytes ("▁" is 3 bytes)
      for (unsigned char ch : piece) width += (ch & 0xC0) != 0x80;
      std::printf("  %.4f  %s%s %s\n", std::exp(double(row[order[std::size_t(j)]] - top)) / z, piece.c_str(),
                  std::string(width < 14 ? 14 - width : 0, ' ').c_str(),
                  filled_text(o.text("text"), m, tok_->written(order[std::size_t(j)]).first, tok_->written(order[std::size_t(j)]).second).c_str());
    }
  }
  return 0;
}

// The batches training step 1..N draws and the validation batches, exactly as this run feeds
// them, for another framework to train on the same data (bench/reference/train_bert.py). Each
// batch padded to the context: ids [N, batch, context], lengths [N, batch], picks (re-based to
// b * context + t) and targets concatenated, batch k's at offsets[k] .. offsets[k + 1].
int BertSession::export_batches(const Config& o) {
  check_output_file(o.text("out"), "--out", o.flag("overwrite"), ctx_.folder);
  if (p_.next_sentence)
    throw config_error("export-batches covers masked-LM runs; this run has next_sentence=true (its pairs and labels are not exported)");
  struct Set {
    std::vector<std::int32_t> ids, lengths, rows, picks, targets, offsets{0};
    std::int32_t pad;
    void add(const data::MlmBatches& b, std::int64_t batch, std::int64_t context) {
      const std::size_t at = ids.size();
      ids.resize(at + std::size_t(batch * context), pad);
      for (std::int64_t r = 0; r < b.batch(); ++r)
        std::copy_n(b.ids().begin() + r * b.seq(), b.seq(), ids.begin() + std::ptrdiff_t(at) + r * context);
      lengths.insert(lengths.end(), b.lengths().begin(), b.lengths().end());
      lengths.resize(lengths.size() + std::size_t(batch - b.batch()), 0);
      rows.push_back(std::int32_t(b.batch()));
      for (std::int32_t p : b.picks()) picks.push_back(std::int32_t(p / b.seq() * context + p % b.seq()));
      targets.insert(targets.end(), b.targets().begin(), b.targets().end());
      offsets.push_back(std::int32_t(picks.size()));
    }
  } train, val;
  train.pad = val.pad = specials_.pad;
  const std::int64_t steps = o.integer("steps");
  for (std::int64_t step = 1; step <= steps && !training::interrupted(); ++step) train_->draw(std::uint64_t(step)), train.add(*train_, batch_, context_);
  for (std::int64_t first = 0; first < std::int64_t(val_seqs_.size()) && !training::interrupted(); first += batch_)
    val_->rows(first, std::min<std::int64_t>(batch_, std::int64_t(val_seqs_.size()) - first)), val.add(*val_, batch_, context_);
  if (training::interrupted()) return 130;
  std::vector<checkpoint::TensorView> t;
  for (auto [name, set] : {std::pair{"train", &train}, std::pair{"val", &val}}) {
    const std::int64_t n = std::int64_t(set->rows.size());
    const std::string p(name);
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".ids", set->ids, {n, batch_, context_}));
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".lengths", set->lengths, {n, batch_}));
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".rows", set->rows, {n}));
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".picks", set->picks, {std::int64_t(set->picks.size())}));
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".targets", set->targets, {std::int64_t(set->targets.size())}));
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".offsets", set->offsets, {n + 1}));
  }
  checkpoint::save(o.text("out"), t, {{"vocab", std::to_string(vocab_)}, {"config", c_.to_json()}});
  std::printf("wrote %s: %lld training batches and %zu validation batches of %lld x %lld\n", o.text("out").c_str(), (long long)steps,
              val.rows.size(), (long long)batch_, (long long)context_);
  return 0;
}

}  // namespace ctgrad::cli::bert
