// ctgrad-bleu: corpus BLEU of a file of hypotheses against a file of references, one sentence a
// line, computed as sacreBLEU does by default (metrics/bleu.hpp).
//   ctgrad-bleu hyp.txt ref.txt        prints the sacreBLEU-style line
//   ctgrad-bleu --tokenize < text      prints each line tokenised by 13a
// A file that cannot be read (a folder, a read error) and output that cannot be written (a full
// disk, a closed descriptor) fail the command with a message, never an empty or partial result.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctgrad/metrics/bleu.hpp>

namespace {
// Lines until the end of `in`; a read that fails before it (EISDIR on a folder) is an error.
std::vector<std::string> read_lines(std::istream& in, const std::string& what) {
  std::vector<std::string> v;
  errno = 0;
  for (std::string l; std::getline(in, l);) v.push_back(l);
  if (in.bad() || (!in.eof() && in.fail()) || errno == EISDIR)
    throw std::runtime_error("cannot read " + what + (errno ? std::string(": ") + std::strerror(errno) : std::string()));
  return v;
}
std::vector<std::string> lines(const char* path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path + ": " + std::strerror(errno));
  return read_lines(in, path);
}
std::string without_prefix(const std::string& m) { return m.rfind("ctgrad: ", 0) == 0 ? m.substr(8) : m; }
}  // namespace

int main(int argc, char** argv) {
  int code = 0;
  try {
    if (argc == 2 && std::string(argv[1]) == "--tokenize") {
      for (const std::string& l : read_lines(std::cin, "standard input")) std::cout << ctgrad::metrics::tokenize_13a(l) << "\n";
    } else if (argc != 3) {
      std::cerr << "usage: ctgrad-bleu hypotheses.txt references.txt | ctgrad-bleu --tokenize\n";
      return 2;
    } else {
      std::cout << ctgrad::metrics::corpus_bleu(lines(argv[1]), lines(argv[2])).str() << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "ctgrad-bleu: " << without_prefix(e.what()) << "\n";
    code = 1;
  }
  std::cout.flush();
  if (std::fflush(stdout) != 0 || !std::cout || std::ferror(stdout)) {
    std::cerr << "ctgrad-bleu: cannot write standard output\n";
    return 1;
  }
  return code;
}
