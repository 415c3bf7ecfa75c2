#include <ctgrad/training/log.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ctgrad::training {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
// Keeps the lines of `file` whose step is below `first` (and a CSV's header), through a temporary
// file and a rename.
void cut_back(const fs::path& file, std::int64_t first, bool csv) {
  std::ifstream in(file);
  if (!in) return;
  std::ostringstream kept;
  std::string line;
  bool header = csv;
  while (std::getline(in, line)) {
    if (header) {
      kept << line << "\n", header = false;
      continue;
    }
    std::int64_t step = -1;
    try {
      step = csv ? std::stoll(line.substr(0, line.find(','))) : json::parse(line).value("step", std::int64_t(-1));
    } catch (const std::exception&) {
      continue;  // a torn last line of a killed run
    }
    if (step >= 0 && step < first) kept << line << "\n";
  }
  in.close();
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept.str();
    out.flush();
    if (!out) throw std::runtime_error("ctgrad: cannot rewrite " + file.string());
  }
  fs::rename(tmp, file);
}
}  // namespace

std::string format_duration(double s) {
  char b[32];
  if (s >= 60) std::snprintf(b, sizeof b, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(b, sizeof b, "%.0fs", s);
  return b;
}

TrainingLog::TrainingLog(const fs::path& dir, std::int64_t first, std::int64_t steps, std::string unit, std::string items)
    : first_(first), steps_(steps), unit_(std::move(unit)), items_(std::move(items)), tty_(::isatty(STDOUT_FILENO)),
      t0_(std::chrono::steady_clock::now()) {
  const bool resume = first > 1;
  if (resume) {
    cut_back(dir / "metrics.jsonl", first, false);
    cut_back(dir / "metrics.csv", first, true);
  }
  jsonl_.open(dir / "metrics.jsonl", resume ? std::ios::app : std::ios::trunc);
  csv_.open(dir / "metrics.csv", resume ? std::ios::app : std::ios::trunc);
  if (!jsonl_ || !csv_) throw std::runtime_error("ctgrad: cannot write the metrics files in " + dir.string());
  if (!resume || fs::file_size(dir / "metrics.csv") == 0) csv_ << "step,loss,lr," << items_ << "_per_s,val_loss\n";
}

double TrainingLog::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count() - paused_;
}

void TrainingLog::step(std::int64_t step, double loss, double lr, double items, const std::optional<Metrics>& val) {
  items_done_ += items;
  avg_ = avg_ < 0 ? loss : 0.9 * avg_ + 0.1 * loss;
  const double secs = seconds(), rate = items_done_ / std::max(secs, 1e-9);
  jsonl_ << json{{"step", step}, {"loss", loss}, {"lr", lr}, {items_ + "_per_s", rate}}.dump() << "\n";
  if (val) {
    json v{{"step", step}, {"train_seconds", secs}};
    bool first = true;
    for (const auto& [name, x] : val->values) v[first ? "val_loss" : "val_" + name] = x, first = false;
    jsonl_ << v.dump() << "\n";
  }
  csv_ << step << ',' << loss << ',' << lr << ',' << rate << ',' << (val ? std::to_string(val->loss()) : "") << "\n";
  csv_.flush();  // a run can be watched (and killed) at any step
  jsonl_.flush();
  const double eta = secs / double(step - first_ + 1) * double(steps_ - step);
  char line[200];
  const int width = 24, filled = int(width * step / std::max<std::int64_t>(steps_, 1));
  std::snprintf(line, sizeof line, "[%s%s] step %lld/%lld  loss %.3f  %.0f %s/s  ETA %s", std::string(std::size_t(filled), '#').c_str(),
                std::string(std::size_t(width - filled), '.').c_str(), (long long)step, (long long)steps_, avg_, rate, items_.c_str(),
                format_duration(eta).c_str());
  if (tty_) std::printf("\r%s", line), std::fflush(stdout);
  else if (step % 100 == 0 && !val) std::printf("%s\n", line), std::fflush(stdout);
  if (val) {
    std::string extra;
    bool first = true;
    for (const auto& [name, x] : val->values) {
      if (!first) {
        char b[64];
        std::snprintf(b, sizeof b, ", %s %.4g", name.c_str(), x);
        extra += b;
      }
      first = false;
    }
    std::printf("%s%s  validation %.4f %s%s\n", tty_ ? "\n" : "", tty_ ? "" : line, val->loss(), unit_.c_str(), extra.c_str());
    std::fflush(stdout);
  }
}

void TrainingLog::close() {
  jsonl_.close();
  csv_.close();
}

std::string gnuplot_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

bool gnuplot(const std::string& script, const fs::path& png) {
  if (!fs::exists("/usr/bin/gnuplot")) {
    std::cerr << "ctgrad: warning: gnuplot not installed (apt-get install gnuplot-nox): no " << png.string() << "\n";
    return false;
  }
  const fs::path file = png.string() + ".gp";
  {
    std::ofstream f(file);
    f << script;
  }
  std::string shell = "'";  // the script's path, quoted for the shell
  for (char c : file.string()) shell += c == '\'' ? std::string("'\\''") : std::string(1, c);
  const int rc = std::system(("/usr/bin/gnuplot " + shell + "' 2>&1").c_str());
  std::error_code ec;
  fs::remove(file, ec);
  if (rc != 0) std::cerr << "ctgrad: warning: gnuplot failed to draw " << png.string() << "\n";
  return rc == 0;
}

void plot_loss(const fs::path& csv, const fs::path& png, const std::string& unit) {
  gnuplot("set terminal png size 800,500\nset output " + gnuplot_quote(png.string()) + "\nset datafile separator ','\n" +
              "set key autotitle columnhead\nset xlabel 'step'\nset ylabel " + gnuplot_quote("loss (" + unit + ")") + "\n" + "plot " +
              gnuplot_quote(csv.string()) + " using 1:2 with lines title 'train', '' using 1:5 with linespoints title 'validation'\n",
          png);
}

}  // namespace ctgrad::training
