#include <ctgrad/metrics/bleu.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

namespace ctgrad::metrics {

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// sacreBLEU's first regex class: [\{-\~\[-\` -\&\(-\+\:-\@\/]
bool is_split_punct(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= '{' && u <= '~') || (u >= '[' && u <= '`') || (u >= ' ' && u <= '&') || (u >= '(' && u <= '+') ||
         (u >= ':' && u <= '@') || u == '/';
}

// The length in bytes of a whitespace character at s[i] (0 if none): Python's str.split()
// whitespace, which sacreBLEU splits on: ASCII space and controls, U+0085, U+00A0, U+1680,
// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
std::size_t space_at(const std::string& s, std::size_t i) {
  const auto b = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = b(0);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  if (c == 0xc2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;
  if (c == 0xe1 && b(1) == 0x9a && b(2) == 0x80) return 3;
  if (c == 0xe2 && b(1) == 0x80 && ((b(2) >= 0x80 && b(2) <= 0x8a) || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf)) return 3;
  if (c == 0xe2 && b(1) == 0x81 && b(2) == 0x9f) return 3;
  if (c == 0xe3 && b(1) == 0x80 && b(2) == 0x80) return 3;
  return 0;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  std::string cur;
  for (std::size_t i = 0; i < s.size();) {
    if (const std::size_t n = space_at(s, i)) {
      if (!cur.empty()) w.push_back(std::move(cur)), cur.clear();
      i += n;
    } else {
      cur += s[i++];
    }
  }
  if (!cur.empty()) w.push_back(std::move(cur));
  return w;
}

}  // namespace

std::string tokenize_13a(const std::string& input) {
  std::string line = input;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  std::replace(line.begin(), line.end(), '\n', ' ');
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  // 1. punctuation of the class above becomes its own token
  std::string a;
  for (char c : line) {
    if (is_split_punct(c)) a += ' ', a += c, a += ' ';
    else a += c;
  }
  // 2. ([^0-9])([\.,]) -> "\1 \2 "  (left to right, non-overlapping, as re.sub)
  std::string b;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (i + 1 < a.size() && !is_digit(a[i]) && (a[i + 1] == '.' || a[i + 1] == ',')) {
      b += a[i], b += ' ', b += a[i + 1], b += ' ';
      ++i;
    } else {
      b += a[i];
    }
  }
  // 3. ([\.,])([^0-9]) -> " \1 \2"
  std::string c;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (i + 1 < b.size() && (b[i] == '.' || b[i] == ',') && !is_digit(b[i + 1])) {
      c += ' ', c += b[i], c += ' ', c += b[i + 1];
      ++i;
    } else {
      c += b[i];
    }
  }
  // 4. ([0-9])(-) -> "\1 \2 "
  std::string d;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i + 1 < c.size() && is_digit(c[i]) && c[i + 1] == '-') {
      d += c[i], d += ' ', d += '-', d += ' ';
      ++i;
    } else {
      d += c[i];
    }
  }
  std::string out;
  for (const auto& w : words(d)) out += (out.empty() ? "" : " ") + w;
  return out;
}

Bleu corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  if (hypotheses.size() != references.size())
    throw std::invalid_argument("ctgrad: corpus_bleu: " + std::to_string(hypotheses.size()) + " hypotheses for " +
                                std::to_string(references.size()) + " references");
  std::array<long long, 4> match{}, total{};
  Bleu r;
  for (std::size_t s = 0; s < hypotheses.size(); ++s) {
    const auto h = words(tokenize_13a(hypotheses[s])), ref = words(tokenize_13a(references[s]));
    r.hyp_len += (long long)h.size();
    r.ref_len += (long long)ref.size();
    for (std::size_t n = 1; n <= 4; ++n) {
      std::map<std::vector<std::string>, long long> ref_counts, hyp_counts;
      for (std::size_t i = 0; i + n <= ref.size(); ++i) ++ref_counts[std::vector<std::string>(ref.begin() + std::ptrdiff_t(i), ref.begin() + std::ptrdiff_t(i + n))];
      for (std::size_t i = 0; i + n <= h.size(); ++i) ++hyp_counts[std::vector<std::string>(h.begin() + std::ptrdiff_t(i), h.begin() + std::ptrdiff_t(i + n))];
      for (const auto& [gram, count] : hyp_counts) {
        const auto it = ref_counts.find(gram);
        if (it != ref_counts.end()) match[n - 1] += std::min(count, it->second);
      }
      total[n - 1] += h.size() >= n ? (long long)(h.size() - n + 1) : 0;
    }
  }
  if (r.hyp_len == 0) return r.brevity_penalty = 0, r;
  // sacreBLEU "exp" smoothing: the k-th zero match count becomes 1 / 2^k.
  double log_sum = 0, smooth = 1;
  for (int n = 0; n < 4; ++n) {
    if (total[std::size_t(n)] == 0) return r;  // no n-grams of this order at all: BLEU 0
    double p;
    if (match[std::size_t(n)] == 0) {
      smooth *= 2;
      p = 100.0 / (smooth * double(total[std::size_t(n)]));
    } else {
      p = 100.0 * double(match[std::size_t(n)]) / double(total[std::size_t(n)]);
    }
    r.precisions[std::size_t(n)] = p;
    log_sum += std::log(p / 100.0);
  }
  r.brevity_penalty = r.hyp_len < r.ref_len ? std::exp(1.0 - double(r.ref_len) / double(r.hyp_len)) : 1.0;
  r.score = 100.0 * r.brevity_penalty * std::exp(log_sum / 4);
  return r;
}

std::string Bleu::str() const {
  char b[256];
  std::snprintf(b, sizeof b, "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", score,
                precisions[0], precisions[1], precisions[2], precisions[3], brevity_penalty,
                ref_len ? double(hyp_len) / double(ref_len) : 0.0, hyp_len, ref_len);
  return b;
}

}  // namespace ctgrad::metrics
