#include <ctgrad/data/text.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

namespace ctgrad::data {

namespace {
// The output of a command (stdout and stderr); a failure names the command, how it ended (exit
// code or signal) and the end of what it printed, on one line.
std::string run(const std::string& cmd, const std::string& what) {
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) throw data_error("ctgrad: cannot run " + what);
  std::string raw;
  char buf[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, pipe);
    raw.append(buf, n);
    if (n > 0) continue;
    if (std::ferror(pipe) && errno == EINTR) {
      std::clearerr(pipe);
      continue;
    }
    break;
  }
  const int status = ::pclose(pipe);
  if (status != 0) {
    std::string how = status == -1                                   ? "could not be waited for"
                      : WIFEXITED(status)                            ? "exited with " + std::to_string(WEXITSTATUS(status))
                      : WIFSIGNALED(status)                          ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                                                     : "failed";
    std::string tail = raw.substr(raw.size() > 160 ? raw.size() - 160 : 0);
    for (char& c : tail)
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    throw data_error("ctgrad: " + what + " " + how + (tail.empty() ? "" : " (its output ends: ..." + tail + ")"));
  }
  return raw;
}
}  // namespace

std::string kjv_text() {
  const char* program = "/usr/bin/bible";
  if (!std::filesystem::exists(program))
    throw data_error("ctgrad: the KJV text needs the Debian package bible-kjv (" + std::string(program) +
                     " is missing): run scripts/setup.sh or apt-get install bible-kjv");
  const std::string raw = run("/usr/bin/bible -l 100000 gen1:1-rev22:21", "/usr/bin/bible");
  std::string out;
  // Verse lines are "  <number> <text>"; book and chapter headings and blank lines are dropped.
  std::size_t pos = 0;
  while (pos < raw.size()) {
    std::size_t end = raw.find('\n', pos);
    if (end == std::string::npos) end = raw.size();
    std::size_t i = pos;
    while (i < end && raw[i] == ' ') ++i;
    const std::size_t digits = i;
    while (i < end && raw[i] >= '0' && raw[i] <= '9') ++i;
    if (i > pos && digits > pos && i > digits && i < end && raw[i] == ' ') out.append(raw, i + 1, end - i - 1).push_back('\n');
    pos = end + 1;
  }
  if (out.size() < 1000000) throw data_error("ctgrad: /usr/bin/bible printed only " + std::to_string(out.size()) + " bytes of verses");
  return out;
}

std::string austen_text() {
  if (!std::filesystem::exists("/usr/bin/Rscript") || !std::filesystem::exists("/usr/lib/R/site-library/janeaustenr"))
    throw data_error("ctgrad: the Jane Austen corpus needs the Debian package r-cran-janeaustenr: run scripts/setup.sh --tests or "
                     "apt-get install r-cran-janeaustenr");
  std::string text = run("/usr/bin/Rscript --vanilla -e 'library(janeaustenr, lib.loc=\"/usr/lib/R/site-library\"); for (b in list(sensesensibility, prideprejudice, "
                         "mansfieldpark, emma, northangerabbey, persuasion)) cat(b, sep=\"\\n\")'",
                         "Rscript (janeaustenr)");
  if (text.size() < 1000000) throw data_error("ctgrad: janeaustenr gave only " + std::to_string(text.size()) + " bytes");
  return text;
}

std::vector<Book> austen_novels(const DataCache& cache) {
  const std::filesystem::path package = "/usr/lib/R/site-library/janeaustenr", rscript = "/usr/bin/Rscript";
  if (!std::filesystem::exists(rscript) || !std::filesystem::exists(package))
    throw data_error("ctgrad: the Jane Austen corpus needs the Debian package r-cran-janeaustenr: run scripts/setup.sh --tests or "
                     "apt-get install r-cran-janeaustenr");
  static const char* titles[] = {"Sense and Sensibility", "Pride and Prejudice", "Mansfield Park", "Emma", "Northanger Abbey", "Persuasion"};
  const std::string marker = "\x1e";  // a record separator line between the books
  // The Debian package's copy (lib.loc), whatever other library folders R would search first;
  // --vanilla: no user's or folder's profile or environment file changes what R prints.
  const std::string cmd = "/usr/bin/Rscript --vanilla -e 'library(janeaustenr, lib.loc=\"/usr/lib/R/site-library\"); for (b in list(sensesensibility, "
                          "prideprejudice, mansfieldpark, emma, northangerabbey, persuasion)) { cat(b, sep=\"\\n\"); cat(\"\\n\\x1e\\n\") }'";
  auto split = [&](const std::string& text) {
    std::vector<Book> books;
    std::size_t pos = 0;
    for (const char* title : titles) {
      const std::size_t end = text.find("\n" + marker + "\n", pos);
      if (end == std::string::npos) throw data_error("ctgrad: janeaustenr printed " + std::to_string(books.size()) + " of the six novels");
      books.push_back({title, text.substr(pos, end + 1 - pos)});
      pos = end + marker.size() + 2;
    }
    for (const Book& b : books)
      if (b.text.size() < 300000) throw data_error("ctgrad: janeaustenr gave only " + std::to_string(b.text.size()) + " bytes of " + b.title);
    return books;
  };
  // The cache entry's name: the command; R's locale settings (they decide how R writes the text);
  // Rscript's, R's and the package's files, by path, size and time. When they cannot be listed,
  // no cache.
  CacheKey key("janeaustenr novels 1");
  bool use_cache = cache.enabled();
  if (use_cache) {
    try {
      key.add(cmd);
      for (const char* v : {"LANG", "LC_ALL", "LC_CTYPE", "LANGUAGE"}) {
        const char* value = std::getenv(v);
        key.add(v).add(value ? std::string_view(value) : std::string_view("\x01unset"));
      }
      std::vector<std::filesystem::path> files{rscript};
      for (const char* f : {"/usr/lib/R/lib/libR.so", "/etc/R/Renviron"})
        if (std::filesystem::exists(f)) files.push_back(f);
      for (const auto& e : std::filesystem::recursive_directory_iterator(package))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files)
        key.add(f.string()).add(std::int64_t(std::filesystem::file_size(f))).add(std::int64_t(std::filesystem::last_write_time(f).time_since_epoch().count()));
    } catch (const std::filesystem::filesystem_error&) {
      use_cache = false;
    }
  }
  if (use_cache)
    if (std::optional<std::string> kept = cache.read(key, "janeaustenr-novels")) {
      try {
        return split(*kept);
      } catch (const data_error&) {  // not what R printed: made again below, and replaced
      }
    }
  const std::string text = run(cmd, "Rscript (janeaustenr)");
  std::vector<Book> books = split(text);
  if (use_cache) cache.write(key, "janeaustenr-novels", text);  // only what passed the checks
  return books;
}

TextSplit split_text(const std::string& text, double train_fraction) {
  if (!(train_fraction > 0 && train_fraction < 1)) throw std::invalid_argument("ctgrad: train fraction must be in (0, 1)");
  std::size_t cut = std::size_t(double(text.size()) * train_fraction);
  const std::size_t nl = text.find('\n', cut);
  if (nl != std::string::npos) cut = nl + 1;
  return {text.substr(0, cut), text.substr(cut)};
}

}  // namespace ctgrad::data
