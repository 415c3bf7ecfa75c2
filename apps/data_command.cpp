// ctgrad data ende [--sources ddtp,libreoffice,gettext] [--placeholders keep|drop] [--max-packages N] [--dir DIR] [--out DIR]
// The EN-DE corpus from Debian's own translations (data/ende/): downloads what it needs into DIR
// ($CTGRAD_DATA/ende), pairs, splits by document, and writes train/validation/test.tsv and
// counts.tsv to --out (DIR/corpus), printing the per-source counts. A second run downloads nothing.
#include <fcntl.h>
#include <sys/file.h>

#include <chrono>
#include <cstdio>
#include <set>

#include <ctgrad/data/ende/corpus.hpp>
#include <ctgrad/data/ende/fetch.hpp>
#include <ctgrad/training/escape.hpp>

#include "option_text.hpp"
#include "task.hpp"

namespace ctgrad::cli {

namespace {
constexpr const char* kUsage =
    "usage: ctgrad data ende [--sources ddtp,libreoffice,gettext] [--placeholders keep|drop] [--max-packages N] [--dir DIR] [--out DIR]";
const std::set<std::string> kSources{"ddtp", "gettext", "libreoffice"};
}  // namespace

int data_command(const std::vector<std::string>& rest) {
  namespace ende = data::ende;
  if (rest.size() < 2 || rest[1] != "ende") throw config_error(kUsage);
  std::filesystem::path dir = ende::ende_dir(), out;
  std::vector<std::string> sources(kSources.begin(), kSources.end());
  ende::SplitOptions split;
  std::int64_t max_packages = 0;  // of the gettext source (0: all)
  for (std::size_t i = 2; i < rest.size(); ++i) {
    const std::string& o = rest[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= rest.size()) throw config_error(o + " needs a value");
      return one_line(o, rest[++i]);
    };
    if (o == "--dir") dir = value();
    else if (o == "--max-packages") max_packages = training::parse_integer(value(), "--max-packages", {.min = 1, .max = 100000});
    else if (o == "--out") out = value();
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
        sources.push_back(s);
        a = b + 1;
      }
    } else {
      throw config_error("unknown option '" + training::printable(o) + "' for ctgrad data ende (" + kUsage + ")");
    }
  }
  if (out.empty()) out = dir / "corpus";
  // One builder at a time in a folder: two would download into the same staging folders.
  std::filesystem::create_directories(dir);
  const int lock = ::open((dir / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0)
    throw config_error("another ctgrad data ende is using " + dir.string() + " (or it cannot be locked): wait for it, or give another --dir");
  const auto t0 = std::chrono::steady_clock::now();
  auto log = [&](const std::string& m) {
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
        auto g = ende::gettext_documents(folder, package);
        d.insert(d.end(), std::make_move_iterator(g.begin()), std::make_move_iterator(g.end()));
      }
    } else {
      const auto en = ende::fetch_package(dir, "libreoffice-help-en-us", log), de = ende::fetch_package(dir, "libreoffice-help-de", log);
      d = ende::libreoffice_documents(en / "usr/share/libreoffice/help/en-US", de / "usr/share/libreoffice/help/de");
    }
    log(s + ": " + std::to_string(d.size()) + " documents read");
    docs.insert(docs.end(), std::make_move_iterator(d.begin()), std::make_move_iterator(d.end()));
  }
  const ende::Corpus c = ende::make_corpus(std::move(docs), split);
  ende::write_corpus(c, out);
  std::printf("%s", ende::count_table(c).c_str());
  log("wrote " + (out / "train.tsv").string() + ", validation.tsv, test.tsv, counts.tsv");
  return 0;
}

}  // namespace ctgrad::cli
