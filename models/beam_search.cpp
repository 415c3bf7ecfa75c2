#include <ctgrad/models/translator.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ctgrad::models {

std::vector<std::int32_t> beam_search(StepDecoder& model, std::int32_t start, std::int32_t eos, const BeamOptions& o) {
  if (o.beam < 1 || o.max_len < 1) throw std::invalid_argument("ctgrad: Translator: beam and max_len must be >= 1");
  if (!(o.alpha >= 0)) throw std::invalid_argument("ctgrad: Translator: the length penalty's alpha must be >= 0");
  struct Hyp {
    std::vector<std::int32_t> tokens;
    double logp = 0;
  };
  struct Cand {
    double score;
    int parent, token;
  };
  const int vocab = model.vocab();
  std::vector<Hyp> alive{Hyp{{start}, 0.0}}, done;
  auto penalty = [&](std::size_t n) { return std::pow((5.0 + double(n)) / 6.0, o.alpha); };
  std::vector<std::int32_t> last;
  std::vector<int> parents;
  std::vector<Cand> cand;
  for (int t = 0; t < o.max_len && !alive.empty() && !(o.stop && o.stop()); ++t) {
    const std::size_t k = alive.size();
    last.resize(k);
    for (std::size_t b = 0; b < k; ++b) last[b] = alive[b].tokens.back();
    const std::span<const float> logits = model.step(last, t);  // [k, vocab]
    // Candidates: each hypothesis extended by each token, scored by total log-probability.
    cand.clear();
    for (std::size_t b = 0; b < k; ++b) {
      const float* l = logits.data() + b * std::size_t(vocab);
      const double mx = *std::max_element(l, l + vocab);
      double z = 0;
      for (int v = 0; v < vocab; ++v) z += std::exp(double(l[v]) - mx);
      const double lse = mx + std::log(z);
      for (int v = 0; v < vocab; ++v) cand.push_back({alive[b].logp + double(l[v]) - lse, int(b), v});
    }
    const std::size_t keep = std::min<std::size_t>(cand.size(), std::size_t(2 * o.beam));
    std::partial_sort(cand.begin(), cand.begin() + std::ptrdiff_t(keep), cand.end(), [](const Cand& a, const Cand& b) {
      return a.score > b.score || (a.score == b.score && (a.parent < b.parent || (a.parent == b.parent && a.token < b.token)));
    });
    std::vector<Hyp> next;
    parents.clear();
    for (std::size_t i = 0; i < keep && int(next.size()) < o.beam; ++i) {
      Hyp h{alive[std::size_t(cand[i].parent)].tokens, cand[i].score};
      h.tokens.push_back(cand[i].token);
      if (cand[i].token == eos) {
        // Finished: kept if among the `beam` best finished so far (by length-penalised score).
        const double sc = h.logp / penalty(h.tokens.size() - 1);
        if (int(done.size()) < o.beam) {
          done.push_back(std::move(h));
        } else {
          auto worst = std::min_element(done.begin(), done.end(), [&](const Hyp& x, const Hyp& y) {
            return x.logp / penalty(x.tokens.size() - 1) < y.logp / penalty(y.tokens.size() - 1);
          });
          if (sc > worst->logp / penalty(worst->tokens.size() - 1)) *worst = std::move(h);
        }
      } else {
        next.push_back(std::move(h));
        parents.push_back(cand[i].parent);
      }
    }
    // Stop when the beam is full of finished hypotheses and no live one can beat the best of
    // them (log-probabilities only fall; with alpha >= 0 the penalty is at most max_len's).
    if (int(done.size()) >= o.beam && !next.empty()) {
      double best_done = -1e300;
      for (const Hyp& h : done) best_done = std::max(best_done, h.logp / penalty(h.tokens.size() - 1));
      if (next.front().logp / penalty(std::size_t(o.max_len)) <= best_done) next.clear();
    }
    alive = std::move(next);
    if (!alive.empty()) model.reorder(parents);
  }
  for (Hyp& h : alive) done.push_back(std::move(h));  // max_len reached: unfinished ones compete too
  const Hyp* best = nullptr;
  double best_score = -1e300;
  for (const Hyp& h : done) {
    const double sc = h.logp / penalty(h.tokens.size() - 1);
    if (!best || sc > best_score) best = &h, best_score = sc;
  }
  if (!best) return {};  // stopped before the first step
  std::vector<std::int32_t> out(best->tokens.begin() + 1, best->tokens.end());
  if (!out.empty() && out.back() == eos) out.pop_back();
  return out;
}

}  // namespace ctgrad::models
