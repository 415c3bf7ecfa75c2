// The real text the language-model tasks share (BERT, T5): KJV verses and Austen paragraphs as
// units that are never split, each document's last tenth held out (so a fine-tuning validation
// passage was never seen in pretraining either), and Austen's novels cut into passages of 1-3
// sentences for the austen-novel task.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctgrad/data/text.hpp>
#include <ctgrad/data/text_source.hpp>
#include <ctgrad/base/random.hpp>
#include <ctgrad/training/escape.hpp>

#include "../task.hpp"
#include "lm_data.hpp"

namespace ctgrad::cli::corpus {

// A novel's paragraphs (lines joined; paragraphs end at an empty line).
inline std::vector<std::string> paragraphs(const data::Book& b) {
  std::vector<std::string> out;
  std::string p;
  for (std::size_t pos = 0; pos <= b.text.size();) {
    const std::size_t end = std::min(b.text.find('\n', pos), b.text.size());
    const std::string line = b.text.substr(pos, end - pos);
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (!p.empty()) out.push_back(std::move(p)), p.clear();
    } else {
      p += (p.empty() ? "" : " ") + line;
    }
    pos = end + 1;
  }
  if (!p.empty()) out.push_back(std::move(p));
  return out;
}

// Where the held-out tail of a corpus of `n` units starts.
inline std::size_t held_out_from(std::size_t n) { return n - n / 10; }

// The corpora as units that are never split between training and validation: KJV verses and
// Austen paragraphs, the last tenth of each corpus held out.
struct Corpus {
  std::vector<std::string> train, validation;
  std::vector<std::size_t> train_docs, validation_docs;  // where each document (the KJV, a novel) starts
};
inline Corpus load_corpus(const data::DataCache& cache = {}) {
  Corpus c;
  auto add = [&](std::vector<std::string> units) {
    const std::size_t cut = held_out_from(units.size());
    c.train_docs.push_back(c.train.size()), c.validation_docs.push_back(c.validation.size());
    c.train.insert(c.train.end(), units.begin(), units.begin() + std::ptrdiff_t(cut));
    c.validation.insert(c.validation.end(), units.begin() + std::ptrdiff_t(cut), units.end());
  };
  {
    std::vector<std::string> verses;
    const std::string kjv = data::kjv_text();
    for (std::size_t pos = 0; pos < kjv.size();) {
      const std::size_t end = std::min(kjv.find('\n', pos), kjv.size());
      if (end > pos) verses.push_back(kjv.substr(pos, end - pos));
      pos = end + 1;
    }
    add(std::move(verses));
  }
  for (const data::Book& b : data::austen_novels(cache)) add(paragraphs(b));
  return c;
}

// The pretraining text keys of BERT and T5: data (kjv+austen, or a user's text), val_data,
// val_fraction, text_field; stated in a saved config only when set.
inline void add_corpus_keys(Schema& s) {
  add_text_data_keys(s, "kjv+austen", "kjv+austen (the KJV's verses and Austen's paragraphs; of your text, each line is a unit)");
}

// A user's text (data/text_source.hpp) as units: each line of a document (blank lines dropped),
// documents held out as data::read_corpus holds them out.
inline Corpus load_user_corpus(const Config& c) {
  data::Corpus docs = read_user_text(c);
  Corpus out;
  auto add = [](std::vector<std::string>& documents, std::vector<std::string>& units, std::vector<std::size_t>& starts) {
    for (std::string& d : documents) {
      const std::size_t first = units.size();
      for (std::size_t pos = 0; pos < d.size();) {
        const std::size_t end = std::min(d.find('\n', pos), d.size());
        if (d.find_first_not_of(" \t\r", pos) < end) units.push_back(d.substr(pos, end - pos));
        pos = end + 1;
      }
      if (units.size() > first) starts.push_back(first);
      std::string().swap(d);
    }
  };
  add(docs.train, out.train, out.train_docs), add(docs.validation, out.validation, out.validation_docs);
  if (out.validation.empty()) throw config_error("data " + training::printable(c.text("data")) + ": its held-out part has no text");
  return out;
}

// The corpus a config names.
inline Corpus corpus_of(const Config& c, const data::DataCache& cache) {
  return c.text("data") == "kjv+austen" ? load_corpus(cache) : load_user_corpus(c);
}

inline constexpr int kNovels = 6;

struct Passage {
  std::string text;
  int label;
};

// A paragraph's sentences: they end at . ! or ? (and any closing quotes or brackets) before a space,
// except after the titles Mr. Mrs. Dr. St.
inline std::vector<std::string> sentences(const std::string& p) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '.' && p[i] != '!' && p[i] != '?') continue;
    std::size_t end = i + 1;
    while (end < p.size() && (p[end] == '"' || p[end] == '\'' || p[end] == ')' || p[end] == '_')) ++end;
    if (end < p.size() && p[end] != ' ') continue;
    const std::size_t word = p.rfind(' ', i) == std::string::npos ? 0 : p.rfind(' ', i) + 1;
    const std::string w = p.substr(word, i - word);
    if (p[i] == '.' && (w == "Mr" || w == "Mrs" || w == "Dr" || w == "St" || w == "Ms")) continue;
    out.push_back(p.substr(start, end - start));
    start = end + 1;
    i = end;
  }
  if (start < p.size()) out.push_back(p.substr(start));
  return out;
}

inline int words(const std::string& s) {
  int n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) n += s[i] != ' ' && (i == 0 || s[i - 1] == ' ');
  return n;
}

// Each novel's paragraphs cut into passages of 1-3 consecutive sentences (the lengths drawn with a
// fixed key: every run sees the same passages); passages of fewer than 4 words (chapter titles,
// "Yes.") are dropped.
struct Passages {
  std::vector<Passage> train, validation;
  std::vector<std::string> titles;
};
inline Passages austen_passages(const data::DataCache& cache = {}) {
  Passages out;
  const auto books = data::austen_novels(cache);
  if (books.size() != kNovels) throw std::runtime_error("expected Austen's " + std::to_string(kNovels) + " novels, found " + std::to_string(books.size()));
  std::uint64_t counter = 0;
  for (int label = 0; label < kNovels; ++label) {
    out.titles.push_back(books[std::size_t(label)].title);
    const auto paras = paragraphs(books[std::size_t(label)]);
    const std::size_t cut = held_out_from(paras.size());
    for (std::size_t i = 0; i < paras.size(); ++i) {
      const auto s = sentences(paras[i]);
      for (std::size_t at = 0; at < s.size();) {
        const std::size_t k = std::min<std::size_t>(1 + random::bits(random::key(0, "austen-novel"), counter++) % 3, s.size() - at);
        std::string text = s[at];
        for (std::size_t j = 1; j < k; ++j) text += " " + s[at + j];
        at += k;
        if (words(text) >= 4) (i < cut ? out.train : out.validation).push_back({std::move(text), label});
      }
    }
  }
  return out;
}

}  // namespace ctgrad::cli::corpus
