// The translation session's evaluation (validation NLL and BLEU, greedy and beam search on the
// test split, attention heatmaps) and translation (translation_session.hpp).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include <ctgrad/base/utf8.hpp>
#include <ctgrad/data/ende/align.hpp>
#include <ctgrad/data/ende/kept_spans.hpp>

#include <ctgrad/data/pairs.hpp>
#include <ctgrad/metrics/bleu.hpp>
#include <ctgrad/training/image_grid.hpp>

#include "../option_text.hpp"
#include "../standard_output.hpp"
#include <ctgrad/models/translation_inputs.hpp>

#include "translation_session.hpp"

namespace ctgrad::cli::translation {
namespace in = models::translation_inputs;

namespace {
// `line` without its control characters (C0 but the tab, DEL, C1): they are not text to translate,
// and one copied to standard output would act on a terminal. Returns the first one dropped, shown
// as \xNN, or "" when there was none.
std::string drop_controls(std::string& line) {
  std::string kept, first;
  for (std::size_t i = 0; i < line.size();) {
    const std::size_t n = std::max<std::size_t>(text::utf8_length(line, i), 1);
    const auto c = static_cast<unsigned char>(line[i]);
    if ((n == 1 && c != '\t' && text::is_control(c)) || text::is_c1(line, i, n)) {
      if (first.empty()) first = training::printable(line.substr(i, n));
    } else {
      kept.append(line, i, n);
    }
    i += n;
  }
  if (!first.empty()) line = std::move(kept);
  return first;
}
}  // namespace

void draw_heatmap(const fs::path& png, const std::string& title, int heads, const float* weights, std::int64_t rows, std::int64_t cols,
                  const std::vector<std::string>& col_tokens, const std::vector<std::string>& row_tokens) {
  const int width = std::max(360 * heads, 7 * int(title.size()) + 40);  // the title fits
  const training::ImageGrid grid{.title = title, .layout_cols = heads, .width = width, .height = 420, .font_size = 8, .rows = rows,
                                 .cols = cols, .unit_range = true, .x_labels = col_tokens, .y_labels = row_tokens};
  std::vector<training::ImagePanel> panels;
  for (int h = 0; h < heads; ++h)
    panels.push_back({.title = heads > 1 ? "head " + std::to_string(h) : "", .values = {weights + h * rows * cols, weights + (h + 1) * rows * cols}});
  if (!training::plot_image_grid(png, grid, panels)) throw std::runtime_error("gnuplot failed to draw " + png.string());
  std::printf("wrote %s\n", training::printable(png.string()).c_str());
}

// Corpus BLEU of greedy translations of the first n validation sentences.
double TranslationSession::validation_bleu(std::size_t n) {
  auto tr = translator();
  std::vector<std::string> refs, hyps;
  for (std::size_t i = 0; i < std::min(n, val_.size()) && !training::interrupted(); ++i) {
    refs.push_back(val_[i].tgt_text);
    hyps.push_back(tok_->decode(tr->greedy(val_[i].src, kBos, kEos, int(max_len_))));
  }
  return metrics::corpus_bleu(hyps, refs).score;
}

int TranslationSession::eval(const Config& o) {
  if (o.was_set("attention-png") && o.text("attention-png").empty()) throw config_error("--attention-png is empty: give the folder for the heatmaps");
  if (o.was_set("sentence") && !o.was_set("attention-png")) throw config_error("--sentence is the heatmaps' sentence: it needs --attention-png");
  if (o.was_set("sentence") && o.text("sentence").find_first_not_of(" \t\n") == std::string::npos)
    throw config_error("--sentence is empty: give the sentence of the heatmaps (without --sentence: the first test sentence)");
  if (const std::string dir = one_line("--attention-png", o.text("attention-png")); !dir.empty()) {  // before the evaluation, not after it
    if (copy_) throw config_error("--attention-png draws a translation model's attention: this run is the copy task");
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir, ec)) throw config_error("--attention-png " + dir + ": cannot make the folder (" + (ec ? ec.message() : "a file is in the way") + ")");
    for (const std::string& file : m_.heatmap_files)  // a user's file of those names is kept
      if (const fs::path png = fs::path(dir) / file; fs::exists(fs::symlink_status(png, ec)))
        throw config_error("--attention-png " + dir + " already holds " + png.filename().string() + ": move it away, or give another folder");
  }
  auto tr = translator();
  if (copy_) {
    int exact = 0;
    for (const auto& e : val_) {
      const auto out = tr->greedy(e.src, 1, -1, 9);
      exact += out == std::vector<std::int32_t>(e.src.begin() + 1, e.src.end());
    }
    std::printf("copy task: %d of %zu held-out sequences copied exactly by greedy decoding\n", exact, val_.size());
    return 0;
  }
  const double nll = validation_nll();
  if (!std::isfinite(nll)) throw std::runtime_error("the validation loss is not finite: the checkpoint's model is broken");
  std::printf("validation loss %.4f nats/token (negative log-likelihood)\n", nll);
  const std::size_t n = c_.integer("eval_sentences") > 0 ? std::min<std::size_t>(test_.size(), std::size_t(c_.integer("eval_sentences"))) : test_.size();
  // Decoded 32 sentences at a time (each sentence's result is its own search's).
  auto decode_all = [&](const std::vector<Example>& set, std::size_t count, const models::BeamOptions& bo, double& seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> out;
    for (std::size_t i = 0; i < count && !training::interrupted(); i += 32) {
      std::vector<std::vector<std::int32_t>> srcs;
      for (std::size_t j = i; j < std::min(count, i + 32); ++j) srcs.push_back(set[j].src);
      for (const auto& ids : tr->search_batch(srcs, kBos, kEos, bo)) out.push_back(tok_->decode(ids));
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  };
  const models::BeamOptions gr{.beam = 1, .alpha = 0, .max_len = int(max_len_), .stop = training::interrupted};
  const models::BeamOptions bo{.beam = int(c_.integer("beam")), .alpha = c_.real("alpha"), .max_len = int(max_len_), .stop = training::interrupted};
  std::vector<std::string> refs, beam;
  auto score = [&](const std::vector<Example>& set, std::size_t count, const char* name) {
    refs.clear();
    for (std::size_t i = 0; i < count; ++i) refs.push_back(set[i].tgt_text);
    double t_greedy = 0, t_beam = 0;
    const std::vector<std::string> greedy = decode_all(set, count, gr, t_greedy);
    beam = decode_all(set, count, bo, t_beam);
    if (training::interrupted()) return;
    std::printf("%s: %zu sentences (EN -> DE), sacreBLEU-style corpus BLEU on detokenised text\n", name, count);
    std::printf("greedy:        %s  (%.1f s, %.1f sentences/s)\n", metrics::corpus_bleu(greedy, refs).str().c_str(), t_greedy,
                double(count) / t_greedy);
    std::printf("beam %d, a %.1f: %s  (%.1f s, %.1f sentences/s)\n", bo.beam, bo.alpha, metrics::corpus_bleu(beam, refs).str().c_str(), t_beam,
                double(count) / t_beam);
    // Examples by a fixed shuffle of the set (seed 52), the same for every model scored on it.
    const std::vector<std::int64_t> order = data::shuffled(std::int64_t(count), 52, 0);
    for (std::size_t i = 0; i < std::min<std::size_t>(count, std::size_t(o.integer("examples"))); ++i) {
      const std::size_t k = std::size_t(order[i]);
      std::printf("\n  EN   %s\n  ref  %s\n  beam %s\n", set[k].src_text.c_str(), refs[k].c_str(), beam[k].c_str());
    }
    std::printf("\n");
  };
  for (const auto& [name, set] : other_tests_) {
    const std::size_t count = c_.integer("eval_sentences") > 0 ? std::min<std::size_t>(set.size(), std::size_t(c_.integer("eval_sentences"))) : set.size();
    score(set, count, (name + " split").c_str());
    if (training::interrupted()) return 130;
  }
  score(test_, n, "test split");
  if (training::interrupted()) return 130;
  if (!o.text("attention-png").empty()) heatmaps(o.text("attention-png"), o.text("sentence").empty() ? test_[0].src_text : o.text("sentence"));
  return 0;
}

int TranslationSession::command(const std::string& name, const Config& o) { return name == "export-batches" ? export_batches(o) : translate(o); }

// Lines of English as lines of German: a line the model cannot read whole (max_len) sentence by
// sentence; a sentence whose translation lost a placeholder or a tag of it, or that holds
// characters the vocabulary lacks, translated around those (data/ende/kept_spans.hpp), which are
// put back as they were. What was done to a line is said on standard error.
std::vector<std::string> TranslationSession::translate_lines(const std::vector<std::string>& lines, std::size_t first_line,
                                                             const models::BeamOptions& bo, models::TranslationSearch& tr, TranslateStats& stats) {
  auto unknown = [this](std::string_view ch) {
    auto [it, fresh] = unknown_chars_.try_emplace(std::string(ch), false);
    if (fresh) {
      const auto ids = tok_->encode(std::string(ch));
      it->second = std::find(ids.begin(), ids.end(), kUnk) != ids.end();
    }
    return it->second;
  };
  // At most kChunk sentences searched at once: a line of 50,000 sentences is 1,563 searches, not
  // one search whose beams outgrow memory.
  constexpr std::size_t kChunk = 32;
  auto decode_batch = [&](const std::vector<std::string>& texts, const std::vector<std::string>& what) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at < texts.size() && !training::interrupted(); at += kChunk) {
      std::vector<std::vector<std::int32_t>> srcs;
      for (std::size_t i = at; i < std::min(texts.size(), at + kChunk); ++i) srcs.push_back(encode_source(texts[i], what[i]));
      for (const auto& ids : tr.search_batch(srcs, kBos, kEos, bo)) out.push_back(tok_->decode(ids));
    }
    return out;
  };
  struct Unit {
    std::size_t line;
    std::string text, out;
    bool cut = false;
  };
  std::vector<Unit> units;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string line = !lines[i].empty() && lines[i].back() == '\r' ? lines[i].substr(0, lines[i].size() - 1) : lines[i];
    const std::string name = "line " + std::to_string(first_line + i);
    if (const std::string control = drop_controls(line); !control.empty()) {
      std::fprintf(stderr, "ctgrad: %s: the control character '%s' is not text: left out of the translation\n", name.c_str(), control.c_str());
      ++stats.controls;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<std::string> parts{line};
    if (std::int64_t(tok_->encode(line).size()) >= max_len_) {
      parts = data::ende::split_sentences(line);
      std::fprintf(stderr, "ctgrad: %s is more than the model reads (max_len %lld tokens): translated sentence by sentence (%zu)\n", name.c_str(),
                   (long long)max_len_, parts.size());
    }
    bool told = false;
    for (std::string& p : parts) {
      Unit u{i, std::move(p), "", false};
      for (std::string_view ch : data::ende::utf8_chars(u.text))
        if (ch != " " && ch != "\t" && unknown(ch)) {
          if (!told) std::fprintf(stderr, "ctgrad: %s: '%s' is not in the vocabulary: copied as it is\n", name.c_str(), training::printable(std::string(ch)).c_str());
          told = true, u.cut = true, ++stats.unknown;
          break;
        }
      units.push_back(std::move(u));
    }
  }
  std::vector<std::string> texts, what;
  for (const Unit& u : units)
    if (!u.cut) texts.push_back(u.text), what.push_back("a sentence of line " + std::to_string(first_line + u.line));
  const std::vector<std::string> whole = decode_batch(texts, what);
  if (training::interrupted()) return {};
  std::size_t k = 0;
  for (Unit& u : units)
    if (!u.cut) {
      u.out = whole[k++];
      if (data::ende::placeholders(u.out) != data::ende::placeholders(u.text)) u.cut = true, ++stats.placeholders;
    }
  // The second pass: the text between the kept spans of the units that need it, in one batch.
  std::vector<data::ende::KeptSpans> spans(units.size());
  texts.clear(), what.clear();
  for (std::size_t j = 0; j < units.size(); ++j)
    if (units[j].cut) {
      spans[j] = data::ende::cut_around_kept(units[j].text, unknown);
      for (std::string& c : data::ende::cores_to_translate(spans[j])) texts.push_back(std::move(c)), what.push_back("a part of line " + std::to_string(first_line + units[j].line));
    }
  const std::vector<std::string> pieces = decode_batch(texts, what);
  if (training::interrupted()) return {};
  k = 0;
  std::vector<std::string> german(lines.size());
  for (std::size_t j = 0; j < units.size(); ++j) {
    Unit& u = units[j];
    if (u.cut) u.out = data::ende::join_around(spans[j], [&](const std::string&) { return pieces[k++]; });
    std::string& g = german[u.line];
    g += (g.empty() ? "" : " ") + u.out;
    ++stats.sentences;
  }
  stats.lines += lines.size();
  return german;
}

int TranslationSession::translate(const Config& o) {
  if (copy_) throw config_error("translate needs a translation model (this run is the copy task)");
  if (o.was_set("text") && o.was_set("input")) throw config_error("--text and --input both say what to translate: give one of them");
  const models::BeamOptions bo{.beam = int(o.integer("beam")), .alpha = o.real("alpha"), .max_len = int(max_len_), .stop = training::interrupted};
  TranslateStats stats;
  auto tr = translator();  // once: its programs and the weights' copy
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = [&] {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "ctgrad: translated %zu lines (%zu sentences; %zu kept placeholders or markup by translating around them, %zu had characters "
                 "the vocabulary lacks, %zu had control characters, left out) in %.1f s: %.1f sentences/s\n", stats.lines, stats.sentences, stats.placeholders,
                 stats.unknown, stats.controls, s, s > 0 ? double(stats.sentences) / s : 0.0);
  };
  if (o.was_set("text")) {
    if (o.text("text").find_first_not_of(" \t\n") == std::string::npos) throw config_error("--text is empty: give a sentence to translate");
    std::vector<std::string> lines;  // a text of several lines: a translated line for each
    for (std::size_t a = 0, b; a <= o.text("text").size(); a = b + 1) {
      b = std::min(o.text("text").find('\n', a), o.text("text").size());
      lines.push_back(o.text("text").substr(a, b - a));
    }
    const auto out = translate_lines(lines, 1, bo, *tr, stats);
    if (training::interrupted()) return 130;
    std::string text;
    for (const auto& g : out) text += g + "\n";
    write_stdout(text);
    return 0;
  }
  // A file, or standard input: a sentence per line, a German line for each (an empty line for an
  // empty one): `batch` lines decoded at once, or each line as it comes when a person types them.
  std::ifstream file;
  const std::string input = o.text("input");
  if (!input.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(input, ec)) throw config_error("--input " + input + ": " + (fs::exists(input, ec) ? "not a regular file" : "no such file"));
    file.open(input);
    if (!file) throw config_error("--input " + input + ": cannot open it (" + std::strerror(errno) + ")");
  }
  std::istream& in = input.empty() ? std::cin : file;
  const std::size_t batch = input.empty() && isatty(0) ? 1 : std::size_t(o.integer("batch"));
  std::vector<std::string> lines;
  std::size_t before = 0;  // the input's lines before this batch's
  bool reader_gone = false;  // `| head -1` has read what it wanted: the end, nothing more said
  auto flush = [&] {
    if (training::interrupted() || reader_gone) return;  // a search cut short is not a translation
    const auto german = translate_lines(lines, before + 1, bo, *tr, stats);
    if (training::interrupted()) return;
    std::string text;
    for (const auto& g : german) text += g + "\n";
    reader_gone = !write_stdout(text);
    before += lines.size();
    lines.clear();
  };
  // Waits for input in slices, so that Ctrl-C ends a read at a terminal (the signal handlers
  // restart interrupted reads).
  auto wait_for_line = [&] {
    if (!input.empty()) return !training::interrupted();
    while (!training::interrupted()) {
      if (std::cin.rdbuf()->in_avail() > 0) return true;
      pollfd p{0, POLLIN, 0};
      const int ready = ::poll(&p, 1, 200);
      if (ready < 0 && errno == EINTR) continue;  // a signal: the loop asks whether it was Ctrl-C
      if (ready != 0) return true;                // input, end of input, or an error: getline tells
    }
    return false;
  };
  for (std::string line; !reader_gone && wait_for_line() && std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() >= batch) flush();
  }
  if (training::interrupted()) return 130;
  if (reader_gone) return 0;
  // A read that failed (standard input closed, or a folder) is not the end of the input.
  if (in.bad() || (input.empty() && std::ferror(stdin))) throw std::runtime_error("cannot read " + (input.empty() ? std::string("standard input") : input) + ": " + std::strerror(errno ? errno : EIO));
  flush();
  if (reader_gone) return 0;
  summary();
  return 0;
}

std::unique_ptr<models::TranslationSearch> TranslationSession::translator() {
  return m_.search(model_->parameters(), Options{.threads = ctx_.threads});
}

// A source of at most max_len tokens, </s> included; `what` names a user's text, which is told
// when it is cut.
std::vector<std::int32_t> TranslationSession::encode_source(const std::string& text, const std::string& what) const {
  std::vector<std::int32_t> src = tok_->encode(text);
  if (std::int64_t(src.size()) >= max_len_) {
    if (!what.empty())
      std::fprintf(stderr, "ctgrad: warning: %s is %zu tokens, more than the model reads (max_len %lld): translating its first %lld\n", what.c_str(),
                   src.size(), (long long)max_len_, (long long)(max_len_ - 1));
    src.resize(std::size_t(max_len_ - 1));
  }
  src.push_back(kEos);
  return src;
}

// The negative log-likelihood of the validation targets (the training loss adds label smoothing).
double TranslationSession::validation_nll() {
  double total = 0, n = 0;
  std::vector<std::int64_t> idx;
  for (std::int64_t i = 0; i < std::int64_t(val_.size()); ++i) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](auto x, auto y) { return val_[std::size_t(x)].src.size() < val_[std::size_t(y)].src.size(); });
  const EvalShard shard{ctx_.comm};
  for (std::size_t b = 0; b < idx.size() && !training::interrupted(); b += std::size_t(batch_)) {
    if (!shard.mine(std::int64_t(b) / batch_)) continue;
    const Batch bt = make_batch(val_, std::span<const std::int64_t>(idx).subspan(b, std::min(idx.size() - b, std::size_t(batch_))), kPad);
    feed(*model_, bt);
    model_->forward(Mode::infer);
    const auto logits = model_->output("logits");  // [B, T, vocab]
    for (std::int64_t r = 0; r < bt.B * bt.T; ++r) {
      if (bt.tgt_out[std::size_t(r)] == m_.pad) continue;
      total += token_nll(logits.data + r * vocab_, vocab_, bt.tgt_out[std::size_t(r)]);
      n += 1;
    }
  }
  double sums[2] = {total, n};
  shard.sum(sums);
  return sums[0] / sums[1];
}

void TranslationSession::heatmaps(const std::string& dir, const std::string& sentence) {
  auto tr = translator();
  const std::vector<std::int32_t> src = encode_source(sentence);
  const auto out = tr->greedy(src, kBos, kEos, int(max_len_));
  std::vector<std::int32_t> tgt_in{kBos};
  tgt_in.insert(tgt_in.end(), out.begin(), out.end());
  auto pieces = [&](const std::vector<std::int32_t>& ids) {
    std::vector<std::string> v;
    for (auto id : ids) v.push_back(id == kBos ? "<s>" : id == kEos ? "</s>" : tok_->decode({id}));
    return v;
  };
  std::printf("\nattention of: %s -> %s\n", sentence.c_str(), tok_->decode(out).c_str());
  m_.heatmaps(model_->parameters(), Options{.threads = ctx_.threads}, dir, src, tgt_in, pieces(src), pieces(tgt_in));
}

}  // namespace ctgrad::cli::translation
