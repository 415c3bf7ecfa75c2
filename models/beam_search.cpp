#include <ctgrad/models/translator.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ctgrad::models {

std::vector<std::vector<std::int32_t>> beam_search(StepDecoder& model, int sentences, std::int32_t start, std::int32_t eos, const BeamOptions& o) {
  if (o.beam < 1 || o.max_len < 1) throw std::invalid_argument("ctgrad: Translator: beam and max_len must be >= 1");
  if (!(o.alpha >= 0)) throw std::invalid_argument("ctgrad: Translator: the length penalty's alpha must be >= 0");
  struct Hyp {
    std::vector<std::int32_t> tokens;
    double logp = 0;
  };
  struct Cand {
    double score;
    int parent, token;  // parent: the row in this step's batch
  };
  const int vocab = model.vocab();
  auto penalty = [&](std::size_t n) { return std::pow((5.0 + double(n)) / 6.0, o.alpha); };
  // Each sentence's search is the single-sentence search; their live hypotheses share the
  // decoder's batch, sentence after sentence.
  const auto n = static_cast<std::size_t>(sentences);
  std::vector<std::vector<Hyp>> alive(n, std::vector<Hyp>{Hyp{{start}, 0.0}}), done(n);
  std::vector<std::int32_t> last;
  std::vector<int> rows_of, parents;
  std::vector<Cand> cand;
  auto live = [&] {
    for (const auto& a : alive)
      if (!a.empty()) return true;
    return false;
  };
  for (int t = 0; t < o.max_len && live() && !(o.stop && o.stop()); ++t) {
    last.clear(), rows_of.clear();
    for (int s = 0; s < sentences; ++s)
      for (const Hyp& h : alive[std::size_t(s)]) last.push_back(h.tokens.back()), rows_of.push_back(s);
    const std::span<const float> logits = model.step(last, rows_of, t);  // [rows, vocab]
    parents.clear();
    int row0 = 0;
    for (int s = 0; s < sentences; ++s) {
      std::vector<Hyp>& al = alive[std::size_t(s)];
      std::vector<Hyp>& dn = done[std::size_t(s)];
      const int k = int(al.size());
      // Candidates: each hypothesis extended by each token, scored by total log-probability.
      cand.clear();
      for (int b = 0; b < k; ++b) {
        const float* l = logits.data() + std::size_t(row0 + b) * std::size_t(vocab);
        const double mx = *std::max_element(l, l + vocab);
        double z = 0;
        for (int v = 0; v < vocab; ++v) z += std::exp(double(l[v]) - mx);
        const double lse = mx + std::log(z);
        for (int v = 0; v < vocab; ++v) cand.push_back({al[std::size_t(b)].logp + double(l[v]) - lse, b, v});
      }
      const std::size_t keep = std::min<std::size_t>(cand.size(), std::size_t(2 * o.beam));
      std::partial_sort(cand.begin(), cand.begin() + std::ptrdiff_t(keep), cand.end(), [](const Cand& a, const Cand& b) {
        return a.score > b.score || (a.score == b.score && (a.parent < b.parent || (a.parent == b.parent && a.token < b.token)));
      });
      std::vector<Hyp> next;
      for (std::size_t i = 0; i < keep && int(next.size()) < o.beam; ++i) {
        Hyp h{al[std::size_t(cand[i].parent)].tokens, cand[i].score};
        h.tokens.push_back(cand[i].token);
        if (cand[i].token == eos) {
          // Finished: kept if among the `beam` best finished so far (by length-penalised score).
          const double sc = h.logp / penalty(h.tokens.size() - 1);
          if (int(dn.size()) < o.beam) {
            dn.push_back(std::move(h));
          } else {
            auto worst = std::min_element(dn.begin(), dn.end(), [&](const Hyp& x, const Hyp& y) {
              return x.logp / penalty(x.tokens.size() - 1) < y.logp / penalty(y.tokens.size() - 1);
            });
            if (sc > worst->logp / penalty(worst->tokens.size() - 1)) *worst = std::move(h);
          }
        } else {
          next.push_back(std::move(h));
          parents.push_back(row0 + cand[i].parent);
        }
      }
      // Stop when the beam is full of finished hypotheses and no live one can beat the best of
      // them (log-probabilities only fall; with alpha >= 0 the penalty is at most max_len's).
      if (int(dn.size()) >= o.beam && !next.empty()) {
        double best_done = -1e300;
        for (const Hyp& h : dn) best_done = std::max(best_done, h.logp / penalty(h.tokens.size() - 1));
        if (next.front().logp / penalty(std::size_t(o.max_len)) <= best_done) {
          parents.resize(parents.size() - next.size());
          next.clear();
        }
      }
      row0 += k;
      al = std::move(next);
    }
    if (!parents.empty()) model.reorder(parents);
  }
  std::vector<std::vector<std::int32_t>> out(n);
  for (int s = 0; s < sentences; ++s) {
    std::vector<Hyp>& dn = done[std::size_t(s)];
    for (Hyp& h : alive[std::size_t(s)]) dn.push_back(std::move(h));  // max_len reached: unfinished ones compete too
    const Hyp* best = nullptr;
    double best_score = -1e300;
    for (const Hyp& h : dn) {
      const double sc = h.logp / penalty(h.tokens.size() - 1);
      if (!best || sc > best_score) best = &h, best_score = sc;
    }
    if (!best) continue;  // stopped before the first step
    out[std::size_t(s)].assign(best->tokens.begin() + 1, best->tokens.end());
    if (!out[std::size_t(s)].empty() && out[std::size_t(s)].back() == eos) out[std::size_t(s)].pop_back();
  }
  return out;
}

std::vector<std::int32_t> beam_search(StepDecoder& model, std::int32_t start, std::int32_t eos, const BeamOptions& o) {
  return beam_search(model, 1, start, eos, o)[0];
}

}  // namespace ctgrad::models
