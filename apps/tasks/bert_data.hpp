// What `ctgrad train bert` and `ctgrad finetune bert` share: the vocabulary's specials and the
// split of Austen's novels into paragraphs, whose last tenth is held out by both (a fine-tuning
// validation passage was never seen in pretraining either).
#pragma once
#include <string>
#include <vector>

#include <ctgrad/data/mlm.hpp>
#include <ctgrad/data/text.hpp>

namespace ctgrad::cli::bert {

// The specials, in SentencePiece's id order (pad 0, unk 1, then the user-defined symbols).
inline constexpr data::MlmSpecials kSpecials{.pad = 0, .unk = 1, .cls = 2, .sep = 3, .mask = 4, .first_regular = 5};

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

}  // namespace ctgrad::cli::bert
