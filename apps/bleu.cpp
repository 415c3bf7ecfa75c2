// ctgrad-bleu: corpus BLEU of a file of hypotheses against a file of references, one sentence a
// line, computed as sacreBLEU does by default (metrics/bleu.hpp).
//   ctgrad-bleu hyp.txt ref.txt        prints the sacreBLEU-style line
//   ctgrad-bleu --tokenize < text      prints each line tokenised by 13a
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <ctgrad/metrics/bleu.hpp>

namespace {
std::vector<std::string> lines(const char* path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  std::vector<std::string> v;
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 2 && std::string(argv[1]) == "--tokenize") {
      for (std::string l; std::getline(std::cin, l);) std::cout << ctgrad::metrics::tokenize_13a(l) << "\n";
      return 0;
    }
    if (argc != 3) {
      std::cerr << "usage: ctgrad-bleu hypotheses.txt references.txt | ctgrad-bleu --tokenize\n";
      return 2;
    }
    std::cout << ctgrad::metrics::corpus_bleu(lines(argv[1]), lines(argv[2])).str() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ctgrad-bleu: " << e.what() << "\n";
    return 1;
  }
}
