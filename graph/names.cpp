#include <ctgrad/graph/tensor.hpp>

#include <algorithm>
#include <vector>

namespace ctgrad {

std::string_view closest_name(std::string_view name, std::span<const std::string_view> known) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diag = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  };
  std::string_view best;
  std::size_t best_d = std::max<std::size_t>(2, name.size() / 3) + 1;
  for (std::string_view k : known)
    if (const std::size_t d = distance(name, k); d < best_d) best = k, best_d = d;
  return best;
}

std::string suggest(std::string_view name, std::span<const std::string_view> known, const char* what) {
  const std::string_view best = closest_name(name, known);
  std::string s = " (";

  if (!best.empty()) s += "did you mean '" + std::string(best) + "'? ";
  if (known.empty()) return s + "the graph has no " + what + ")";
  s += std::string(what) + ": ";
  for (std::size_t i = 0; i < known.size() && i < 20; ++i) s += (i ? ", '" : "'") + std::string(known[i]) + "'";
  if (known.size() > 20) s += ", ... (" + std::to_string(known.size()) + " in all)";
  return s + ")";
}

}  // namespace ctgrad
