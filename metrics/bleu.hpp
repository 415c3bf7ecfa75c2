// Corpus BLEU computed the way sacreBLEU does by default (BLEU-4, one reference, the "13a"
// tokenizer of mteval-v13a applied to detokenised text, clipped n-gram counts summed over the
// corpus, brevity penalty, "exp" smoothing of zero counts), so that scores compare with published
// sacreBLEU numbers.
#pragma once
#include <array>
#include <string>
#include <vector>

namespace ctgrad::metrics {

// mteval-v13a tokenisation: punctuation split off, periods and commas except between digits.
std::string tokenize_13a(const std::string& line);

struct Bleu {
  double score = 0;                  // 0..100
  std::array<double, 4> precisions{};  // n-gram precisions, percent
  double brevity_penalty = 1;
  long long hyp_len = 0, ref_len = 0;
  std::string str() const;  // "BLEU = 27.31 58.1/33.5/20.9/13.2 (BP = 1.000 ratio = 1.012 hyp_len = ... ref_len = ...)"
};

// Throws std::invalid_argument when the lists differ in length.
Bleu corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

}  // namespace ctgrad::metrics
