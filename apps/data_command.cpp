// ctgrad data ende [--sources ddtp,libreoffice,gettext] [--placeholders keep|drop] [--max-packages N] [--dir DIR] [--out DIR] [--overwrite]
// The EN-DE corpus from Debian's own translations (data/ende/): downloads what it needs into DIR
// ($CTGRAD_DATA/ende), pairs, splits by document, and writes train/validation/test.tsv and
// counts.tsv to --out (DIR/corpus), printing the per-source counts. A second run downloads nothing.
// A source that yields nothing fails the command (exit 1); a corpus already in --out is replaced only
// with --overwrite, or, in DIR/corpus (ctgrad's own), by one with at least as many training pairs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>

#include <ctgrad/data/ende/corpus.hpp>
#include <ctgrad/data/ende/fetch.hpp>
#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/folder_lock.hpp>
#include <ctgrad/training/trainer.hpp>

#include "option_text.hpp"
#include "task.hpp"

namespace ctgrad::cli {

namespace {
constexpr const char* kUsage =
    "usage: ctgrad data ende [--sources ddtp,libreoffice,gettext] [--placeholders keep|drop] [--max-packages N] [--dir DIR] [--out DIR] "
    "[--overwrite]";
const std::set<std::string> kSources{"ddtp", "gettext", "libreoffice"};
const char* const kCorpusFiles[] = {"train.tsv", "validation.tsv", "test.tsv", "counts.tsv"};

// A folder the command writes into, made now (before any download): an empty name, a file in the
// way or a folder that cannot be made is refused naming the option.
void make_folder(const std::string& option, const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw config_error(option + " is empty: give a folder");
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw config_error(option + " " + training::printable(dir.string()) + " is not a folder (" + (fs::is_regular_file(st) ? "a file" : "a device, FIFO or socket") +
                       "): give a folder");
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    throw config_error(option + " " + training::printable(dir.string()) + ": cannot make the folder (" + (ec ? ec.message() : "something is in the way") + ")");
}

// The training pairs of a corpus in `dir` (its train.tsv's lines), or nothing when it holds none.
std::optional<std::size_t> training_pairs(const std::filesystem::path& dir) {
  std::ifstream in(dir / "train.tsv", std::ios::binary);
  if (!in) return std::nullopt;
  std::size_t lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  return lines;
}
}  // namespace

int data_tokenize_command(const std::vector<std::string>& rest);  // apps/data_tokenize.cpp

int data_command(const std::vector<std::string>& rest) {
  namespace ende = data::ende;
  if (rest.size() >= 2 && rest[1] == "tokenize") return data_tokenize_command(rest);
  if (rest.size() < 2 || rest[1] != "ende") throw config_error(std::string(kUsage) + "\n   or: ctgrad data tokenize --data PATH --out DIR ... (ctgrad data tokenize --help)");
  std::filesystem::path dir = ende::ende_dir(), out;
  std::vector<std::string> sources(kSources.begin(), kSources.end());
  ende::SplitOptions split;
  std::int64_t max_packages = 0;  // of the gettext source (0: all)
  bool overwrite = false, out_given = false;
  std::set<std::string> given;
  for (std::size_t i = 2; i < rest.size(); ++i) {
    const std::string& o = rest[i];
    if (o == "--help" || o == "-h") return std::printf("%s\n", kUsage), 0;
    if (o.rfind("--", 0) == 0 && !given.insert(o).second) throw config_error(training::printable(o) + " is given twice");
    auto value = [&]() -> std::string {
      if (i + 1 >= rest.size()) throw config_error(o + " needs a value");
      return one_line(o, rest[++i]);
    };
    if (o == "--overwrite") overwrite = true;
    else if (o == "--dir") dir = value();
    else if (o == "--max-packages") max_packages = training::parse_integer(value(), "--max-packages", {.min = 1, .max = 100000});
    else if (o == "--out") out = value(), out_given = true;
    else if (o == "--placeholders") {
      const std::string v = value();
      if (v != "keep" && v != "drop") throw config_error("--placeholders " + training::printable(v) + ": keep or drop");
      split.placeholders = v == "keep" ? ende::Placeholders::keep : ende::Placeholders::drop;
    } else if (o == "--sources") {
      sources.clear();
      const std::string v = value();
      for (std::size_t a = 0; a <= v.size();) {
        const std::size_t b = std::min(v.find(',', a), v.size());
        const std::string s = v.substr(a, b - a);
        if (!kSources.count(s)) throw config_error("--sources: unknown source '" + training::printable(s) + "' (sources: ddtp, libreoffice, gettext)");
        if (std::find(sources.begin(), sources.end(), s) != sources.end()) throw config_error("--sources names " + s + " twice");
        sources.push_back(s);
        a = b + 1;
      }
    } else {
      throw config_error("unknown option '" + training::printable(o) + "' for ctgrad data ende (" + kUsage + ")");
    }
  }
  make_folder("--dir", dir);
  if (!out_given) out = dir / "corpus";
  make_folder("--out", out);
  // A user's files in --out are theirs: replaced only when asked (ctgrad's own corpus folder, by a
  // corpus at least as large; checked at the end).
  if (out_given && !overwrite)
    for (const char* f : kCorpusFiles)
      if (std::error_code ec; std::filesystem::exists(std::filesystem::symlink_status(out / f, ec)))
        throw config_error("--out " + training::printable(out.string()) + " already holds " + f + ": add --overwrite to replace the corpus there, or give another --out");
  // One builder at a time in a folder: two would download into the same staging folders.
  const training::FolderLock lock(dir, ".lock", "the EN-DE data folder", "another ctgrad data ende");
  data::ende::set_stop_check(training::interrupted);  // Ctrl-C stops apt-get and dpkg-deb too
  const auto t0 = std::chrono::steady_clock::now();
  auto log = [&](const std::string& m) {
    ende::throw_if_stopped();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[%6.1fs] %s\n", s, training::printable(m).c_str());
    std::fflush(stdout);
  };
  std::vector<ende::Document> docs;
  for (const std::string& s : sources) {
    std::vector<ende::Document> d;
    if (s == "ddtp") {
      const ende::DdtpFiles f = ende::fetch_ddtp(dir, log);
      d = ende::ddtp_documents(f.en, f.de);
    } else if (s == "gettext") {
      auto packages = ende::packages_with_german_catalogues(dir, log);
      log("gettext: " + std::to_string(packages.size()) + " packages ship German catalogues" +
          (max_packages && std::int64_t(packages.size()) > max_packages ? " (the first " + std::to_string(max_packages) + " taken: --max-packages)" : ""));
      if (max_packages && std::int64_t(packages.size()) > max_packages) packages.resize(std::size_t(max_packages));
      for (const auto& [package, folder] : ende::fetch_catalogues(dir, packages, log)) {
        ende::throw_if_stopped();
        auto g = ende::gettext_documents(folder, package);
        d.insert(d.end(), std::make_move_iterator(g.begin()), std::make_move_iterator(g.end()));
      }
    } else {
      const auto en = ende::fetch_package(dir, "libreoffice-help-en-us", log), de = ende::fetch_package(dir, "libreoffice-help-de", log);
      d = ende::libreoffice_documents(en / "usr/share/libreoffice/help/en-US", de / "usr/share/libreoffice/help/de");
    }
    log(s + ": " + std::to_string(d.size()) + " documents read");
    if (d.empty()) throw data::data_error("ctgrad: the source " + s + " gave no documents: no corpus written");
    docs.insert(docs.end(), std::make_move_iterator(d.begin()), std::make_move_iterator(d.end()));
  }
  const ende::Corpus c = ende::make_corpus(std::move(docs), split);
  ende::throw_if_stopped();
  if (c.train.empty()) throw data::data_error("ctgrad: the sources gave no training pairs: no corpus written");
  if (const auto before = training_pairs(out); before && !overwrite && *before > c.train.size())
    throw data::data_error("ctgrad: " + out.string() + " holds a corpus of " + std::to_string(*before) + " training pairs; this one has " +
                           std::to_string(c.train.size()) + ": kept (add --overwrite to replace it)");
  ende::write_corpus(c, out);
  std::printf("%s", ende::count_table(c).c_str());
  log("wrote " + (out / "train.tsv").string() + ", validation.tsv, test.tsv, counts.tsv");
  return 0;
}

}  // namespace ctgrad::cli
