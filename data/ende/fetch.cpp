#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/data/ende/fetch.hpp>
#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/data/text.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

namespace ctgrad::data::ende {
namespace fs = std::filesystem;
namespace {

bool package_name(const std::string& n) {
  if (n.size() < 2 || n.size() > 100 || !(std::islower(static_cast<unsigned char>(n[0])) || std::isdigit(static_cast<unsigned char>(n[0]))))
    return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  });
}

std::string one_line_tail(const std::string& s) {
  std::string t = s.substr(s.size() > 200 ? s.size() - 200 : 0);
  for (char& c : t)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return t;
}

// The .deb of `name` already in `debs`, if any.
fs::path downloaded(const fs::path& debs, const std::string& name) {
  std::error_code ec;
  if (!fs::is_directory(debs, ec)) return {};
  for (const auto& e : fs::directory_iterator(debs)) {
    const std::string f = e.path().filename().string();
    if (e.is_regular_file() && f.rfind(name + "_", 0) == 0 && f.size() > 4 && f.substr(f.size() - 4) == ".deb") return e.path();
  }
  return {};
}

std::string read_all(const fs::path& p) {
  const auto bytes = checkpoint::read_regular_file(p, "ctgrad: " + p.string(), std::size_t(1) << 31);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

fs::path ende_dir() {
  const char* d = std::getenv("CTGRAD_DATA");
  return fs::path(d && *d ? d : "/var/cache/ctgrad") / "ende";
}

DdtpFiles fetch_ddtp(const fs::path& dir, const Log& log) {
  const fs::path out = dir / "ddtp";
  DdtpFiles f{out / "Translation-en", out / "Translation-de"};
  std::error_code ec;
  if (fs::is_regular_file(f.en, ec) && fs::is_regular_file(f.de, ec)) return f;
  const fs::path lists = dir / "apt" / "lists", cache = dir / "apt" / "cache";
  fs::create_directories(lists / "partial");
  fs::create_directories(cache / "archives" / "partial");
  log("ddtp: apt-get update into " + lists.string() + " (the package descriptions in English and German)");
  run_checked({"apt-get", "update", "-qq", "-o", "Dir::State::Lists=" + lists.string(), "-o", "Dir::Cache=" + cache.string(), "-o",
               "Acquire::Languages=de,en", "-o", "Acquire::GzipIndexes=false"},
              "apt-get update (for the DDTP translations)");
  for (const auto& [lang, target] : {std::pair<std::string, fs::path>{"en", f.en}, {"de", f.de}}) {
    std::vector<fs::path> parts;
    for (const auto& e : fs::directory_iterator(lists)) {
      const std::string n = e.path().filename().string();
      if (e.is_regular_file() && n.find("_main_i18n_Translation-" + lang) != std::string::npos && n.size() == n.find("Translation-" + lang) + 14)
        parts.push_back(e.path());
    }
    if (parts.empty())
      throw data_error("ctgrad: apt-get update gave no Translation-" + lang + " of a main component in " + lists.string() +
                       " (the configured apt sources have no i18n index)");
    std::sort(parts.begin(), parts.end());
    std::string all;
    for (const auto& p : parts) all += read_all(p) + "\n";
    fs::create_directories(out);
    checkpoint::write_atomically(target, all);
  }
  return f;
}

fs::path fetch_package(const fs::path& dir, const std::string& name, const Log& log) {
  if (!package_name(name)) throw data_error("ctgrad: '" + name + "' is not a Debian package name");
  const fs::path debs = dir / "debs", root = dir / "unpacked" / name, done = root / ".ctgrad-complete";
  std::error_code ec;
  if (fs::exists(done, ec)) return root;
  fs::path deb = downloaded(debs, name);
  if (deb.empty()) {
    const fs::path staging = debs / (".partial-" + name);
    fs::remove_all(staging);
    fs::create_directories(staging);
    log("downloading " + name);
    Ran r = run_program({"apt-get", "download", "-q", name}, staging);
    if (r.status != 0) {  // an index older than the mirror: refresh it once, as scripts/setup.sh does
      run_program({"apt-get", "update", "-qq"});
      r = run_program({"apt-get", "download", "-q", name}, staging);
    }
    if (r.status != 0) throw data_error("ctgrad: cannot get the package " + name + " (apt-get download: ..." + one_line_tail(r.output) + ")");
    deb = downloaded(staging, name);
    if (deb.empty()) throw data_error("ctgrad: apt-get download " + name + " gave no .deb");
    fs::rename(deb, debs / deb.filename());
    fs::remove_all(staging);
    deb = debs / deb.filename();
  }
  const fs::path partial = dir / "unpacked" / ("." + name + ".partial");
  fs::remove_all(partial);
  fs::remove_all(root);
  fs::create_directories(partial);
  log("unpacking " + deb.filename().string());
  run_checked({"dpkg-deb", "-x", deb.string(), partial.string()}, "dpkg-deb -x " + deb.filename().string());
  fs::rename(partial, root);
  checkpoint::write_atomically(done, deb.filename().string() + "\n");
  return root;
}

}  // namespace ctgrad::data::ende
