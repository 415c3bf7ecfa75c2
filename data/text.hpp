// Text corpora from Debian packages, and splits. Nothing is downloaded; a missing package is a
// one-line error that names it.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include <ctgrad/data/cache.hpp>

namespace ctgrad::data {

struct data_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The King James Bible (Debian bible-kjv), one verse per line: about 4.3 MB, 31,102 verses.
std::string kjv_text();

// Jane Austen's six novels (Debian r-cran-janeaustenr, read through R's Rscript): about 4 MB.
std::string austen_text();
// The same six novels one by one, with their titles, in janeaustenr's order (Sense and Sensibility,
// Pride and Prejudice, Mansfield Park, Emma, Northanger Abbey, Persuasion). Lines as printed;
// paragraphs end at an empty line.
struct Book {
  std::string title, text;
};
// With a cache, R's output is kept and read back while the package's files stay as they were
// (R's start-up is about a second of every BERT or T5 run).
std::vector<Book> austen_novels(const DataCache& cache = {});

struct TextSplit {
  std::string train, validation;
};
// Deterministic: the first `train_fraction` of the text (cut at a line break) trains, the rest validates.
TextSplit split_text(const std::string& text, double train_fraction = 0.9);

}  // namespace ctgrad::data
