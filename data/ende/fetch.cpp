#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/data/ende/fetch.hpp>
#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/data/text.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
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

std::string read_all(const fs::path& p) { return read_text_file(p, p.string(), std::size_t(1) << 31); }

}  // namespace

fs::path ende_dir() {
  const char* d = std::getenv("CTGRAD_DATA");
  return fs::path(d && *d ? d : "/var/cache/ctgrad") / "ende";
}

namespace {
// What apt said went wrong: its first failure line (offline: "W: Failed to fetch ... Could not
// resolve ..."), else the end of its output.
std::string apt_said(const std::string& output) {
  for (std::size_t a = 0; a < output.size();) {
    const std::size_t b = std::min(output.find('\n', a), output.size());
    const std::string line = output.substr(a, b - a);
    if (line.find("Failed to fetch") != std::string::npos || line.rfind("E: ", 0) == 0 || line.rfind("Err:", 0) == 0) return output_tail(line);
    a = b + 1;
  }
  const std::string tail = output_tail(output);
  return tail.find_first_not_of(' ') == std::string::npos ? "it printed nothing" : "..." + tail;
}

// apt-get update into the private lists, with the i18n and (when asked) the Contents indices;
// returns what apt printed (it exits 0 when a mirror cannot be reached, with a warning).
std::string update_lists(const fs::path& dir, bool contents, const std::string& what) {
  const fs::path lists = dir / "apt" / "lists", cache = dir / "apt" / "cache";
  fs::create_directories(lists / "partial");
  fs::create_directories(cache / "archives" / "partial");
  std::vector<std::string> argv{"apt-get", "update", "-qq", "-o", "Dir::State::Lists=" + lists.string(), "-o", "Dir::Cache=" + cache.string(),
                                "-o", "Acquire::Languages=de,en", "-o", "Acquire::GzipIndexes=false"};
  if (contents)
    for (const char* o : {"Acquire::IndexTargets::deb::Contents-deb::MetaKey=$(COMPONENT)/Contents-$(ARCHITECTURE)",
                          "Acquire::IndexTargets::deb::Contents-deb::ShortDescription=Contents-$(ARCHITECTURE)",
                          "Acquire::IndexTargets::deb::Contents-deb::Description=$(RELEASE)/$(COMPONENT) $(ARCHITECTURE) Contents (deb)"})
      argv.insert(argv.end(), {"-o", o});
  return run_checked(argv, what);
}
}  // namespace

DdtpFiles fetch_ddtp(const fs::path& dir, const Log& log) {
  const fs::path out = dir / "ddtp";
  DdtpFiles f{out / "Translation-en", out / "Translation-de"};
  std::error_code ec;
  if (fs::is_regular_file(f.en, ec) && fs::is_regular_file(f.de, ec)) return f;
  const fs::path lists = dir / "apt" / "lists";
  log("ddtp: apt-get update into " + lists.string() + " (the package descriptions in English and German)");
  const std::string said = update_lists(dir, false, "apt-get update (for the DDTP translations)");
  for (const auto& [lang, target] : {std::pair<std::string, fs::path>{"en", f.en}, {"de", f.de}}) {
    std::vector<fs::path> parts;
    for (const auto& e : fs::directory_iterator(lists)) {
      const std::string n = e.path().filename().string();
      if (e.is_regular_file() && n.find("_main_i18n_Translation-" + lang) != std::string::npos && n.size() == n.find("Translation-" + lang) + 14)
        parts.push_back(e.path());
    }
    if (parts.empty())
      throw data_error("ctgrad: apt-get update gave no Translation-" + lang + " of a main component in " + lists.string() + " (apt-get: " +
                       apt_said(said) + ")");
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
    if (r.status != 0) throw data_error("ctgrad: cannot get the package " + name + " (apt-get download: " + apt_said(r.output) + ")");
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

std::vector<std::string> packages_with_german_catalogues(const fs::path& dir, const Log& log) {
  const fs::path lists = dir / "apt" / "lists", list = dir / "gettext-packages";
  std::error_code ec;
  if (!fs::is_regular_file(list, ec)) {
    log("gettext: apt-get update with the Contents indices into " + lists.string() + " (which packages ship German catalogues)");
    const std::string said = update_lists(dir, true, "apt-get update (for the Contents indices)");
    std::vector<fs::path> indices;
    for (const auto& e : fs::directory_iterator(lists)) {
      const std::string n = e.path().filename().string();
      if (e.is_regular_file() && n.find("_main_Contents-") != std::string::npos) indices.push_back(e.path());
    }
    if (indices.empty()) throw data_error("ctgrad: apt-get update gave no Contents index in " + lists.string() + " (apt-get: " + apt_said(said) + ")");
    std::set<std::string> found;
    const std::string prefix = "usr/share/locale/de/LC_MESSAGES/";
    for (const auto& idx : indices) {
      // Lines "path<spaces>section/package,section/package"; the lists may be compressed (lz4): apt's helper reads either.
      std::string carry;
      auto line = [&](std::string_view l) {
        if (l.rfind(prefix, 0) != 0) return;
        const std::size_t sp = l.find_last_of(" \t");
        if (sp == std::string_view::npos || l.substr(0, sp).find(".mo") == std::string_view::npos) return;
        std::string_view owners = l.substr(sp + 1);
        while (!owners.empty()) {
          const std::size_t comma = std::min(owners.find(','), owners.size());
          const std::string_view o = owners.substr(0, comma);
          const std::size_t slash = o.rfind('/');
          const std::string name(slash == std::string_view::npos ? o : o.substr(slash + 1));
          if (package_name(name)) found.insert(name);
          owners.remove_prefix(std::min(comma + 1, owners.size()));
        }
      };
      const Ran r = run_program({"/usr/lib/apt/apt-helper", "cat-file", idx.string()}, {}, [&](std::string_view chunk) {
        carry.append(chunk);
        std::size_t start = 0, nl;
        while ((nl = carry.find('\n', start)) != std::string::npos) {
          line(std::string_view(carry).substr(start, nl - start));
          start = nl + 1;
        }
        carry.erase(0, start);
      });
      if (r.status != 0) throw data_error("ctgrad: cannot read the Contents index " + idx.string() + " (apt-helper cat-file: ..." + output_tail(r.output) + ")");
    }
    std::string text;
    for (const auto& n : found) text += n + "\n";
    checkpoint::write_atomically(list, text);
    for (const auto& idx : indices) fs::remove(idx, ec);  // hundreds of megabytes, read once: the list is what is kept
  }
  std::vector<std::string> out;
  const std::string text = read_all(list);
  for (std::size_t a = 0; a < text.size();) {
    const std::size_t b = std::min(text.find('\n', a), text.size());
    if (b > a) out.push_back(text.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

std::vector<std::pair<std::string, fs::path>> fetch_catalogues(const fs::path& dir, const std::vector<std::string>& packages, const Log& log) {
  const fs::path root = dir / "catalogues", staging = dir / "debs" / ".partial-catalogues";
  std::vector<std::pair<std::string, fs::path>> have;
  std::vector<std::string> todo;
  std::error_code ec;
  for (const auto& p : packages) {
    if (!package_name(p)) throw data_error("ctgrad: '" + p + "' is not a Debian package name");
    if (fs::exists(root / p / ".ctgrad-complete", ec)) have.emplace_back(p, root / p);
    else todo.push_back(p);
  }
  if (!todo.empty()) log("gettext: " + std::to_string(have.size()) + " packages' catalogues already here, " + std::to_string(todo.size()) + " to download");
  constexpr std::size_t kBatch = 40;
  std::size_t missing = 0, unpacked = 0;
  std::string first_failure;  // what apt said of the first package it could not get
  for (std::size_t b = 0; b < todo.size(); b += kBatch) {
    const std::vector<std::string> batch(todo.begin() + std::ptrdiff_t(b), todo.begin() + std::ptrdiff_t(std::min(todo.size(), b + kBatch)));
    fs::remove_all(staging);
    fs::create_directories(staging);
    std::vector<std::string> argv{"apt-get", "download", "-q"};
    argv.insert(argv.end(), batch.begin(), batch.end());
    if (run_program(argv, staging).status != 0)  // one name apt cannot get fails the batch: then one by one
      for (const auto& p : batch) {
        if (!downloaded(staging, p).empty()) continue;
        const Ran r = run_program({"apt-get", "download", "-q", p}, staging);
        if (r.status == 0) continue;
        log("gettext: cannot get " + p + " (apt-get download: " + apt_said(r.output) + "): left out");
        if (first_failure.empty()) first_failure = apt_said(r.output);
        ++missing;
      }
    for (const auto& p : batch) {
      const fs::path deb = downloaded(staging, p);
      if (deb.empty()) continue;
      const fs::path partial = root / ("." + p + ".partial");
      fs::remove_all(partial);
      fs::create_directories(partial);
      const Ran r = run_pipeline({"dpkg-deb", "--fsys-tarfile", deb.string()},
                                 {"tar", "-x", "-C", partial.string(), "--wildcards", "--no-same-owner", "./usr/share/locale/de/LC_MESSAGES/*.mo"});
      if (r.status != 0 && r.output.find("Not found in archive") == std::string::npos)
        throw data_error("ctgrad: cannot unpack the catalogues of " + deb.filename().string() + ": ..." + output_tail(r.output));
      fs::remove(deb);
      fs::remove_all(root / p);
      fs::rename(partial, root / p);
      checkpoint::write_atomically(root / p / ".ctgrad-complete", deb.filename().string() + "\n");
      have.emplace_back(p, root / p);
      ++unpacked;
    }
    log("gettext: " + std::to_string(unpacked) + " of " + std::to_string(std::min(todo.size(), b + kBatch)) + " packages so far downloaded and unpacked (" +
        std::to_string(todo.size()) + " to get)");
  }
  fs::remove_all(staging);
  if (missing) log("gettext: " + std::to_string(missing) + " packages could not be had");
  if (have.empty() && !packages.empty())
    throw data_error("ctgrad: gettext: none of the " + std::to_string(packages.size()) + " packages could be had (apt-get download: " +
                     (first_failure.empty() ? std::string("no .deb came") : first_failure) + ")");
  std::sort(have.begin(), have.end());
  return have;
}

}  // namespace ctgrad::data::ende
