#include <ctgrad/data/text.hpp>

#include <cstdio>
#include <filesystem>

namespace ctgrad::data {

std::string kjv_text() {
  const char* program = "/usr/bin/bible";
  if (!std::filesystem::exists(program))
    throw data_error("ctgrad: the KJV text needs the Debian package bible-kjv (" + std::string(program) +
                     " is missing): run scripts/setup.sh or apt-get install bible-kjv");
  FILE* pipe = ::popen("/usr/bin/bible -l 100000 gen1:1-rev22:21 2>&1", "r");
  if (!pipe) throw data_error("ctgrad: cannot run /usr/bin/bible");
  std::string out, line;
  char buf[1 << 16];
  std::size_t n;
  std::string raw;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) raw.append(buf, n);
  const int rc = ::pclose(pipe);
  if (rc != 0) throw data_error("ctgrad: /usr/bin/bible failed (exit " + std::to_string(rc) + "): " + raw.substr(0, 200));
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

namespace {
std::string run(const std::string& cmd, const std::string& what) {
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) throw data_error("ctgrad: cannot run " + what);
  std::string raw;
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) raw.append(buf, n);
  const int rc = ::pclose(pipe);
  if (rc != 0) throw data_error("ctgrad: " + what + " failed (exit " + std::to_string(rc) + "): " + raw.substr(0, 300));
  return raw;
}
}  // namespace

std::string austen_text() {
  if (!std::filesystem::exists("/usr/bin/Rscript") || !std::filesystem::exists("/usr/lib/R/site-library/janeaustenr"))
    throw data_error("ctgrad: the Jane Austen corpus needs the Debian package r-cran-janeaustenr: run scripts/setup.sh or "
                     "apt-get install r-cran-janeaustenr");
  std::string text = run("/usr/bin/Rscript -e 'library(janeaustenr); for (b in list(sensesensibility, prideprejudice, "
                         "mansfieldpark, emma, northangerabbey, persuasion)) cat(b, sep=\"\\n\")'",
                         "Rscript (janeaustenr)");
  if (text.size() < 1000000) throw data_error("ctgrad: janeaustenr gave only " + std::to_string(text.size()) + " bytes");
  return text;
}

TextSplit split_text(const std::string& text, double train_fraction) {
  if (!(train_fraction > 0 && train_fraction < 1)) throw std::invalid_argument("ctgrad: train fraction must be in (0, 1)");
  std::size_t cut = std::size_t(double(text.size()) * train_fraction);
  const std::size_t nl = text.find('\n', cut);
  if (nl != std::string::npos) cut = nl + 1;
  return {text.substr(0, cut), text.substr(cut)};
}

}  // namespace ctgrad::data
