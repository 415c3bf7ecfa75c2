#include "task.hpp"

#include <cstdio>
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

namespace ctgrad::cli {

namespace {
std::vector<Task>& registry() {
  static std::vector<Task> r;
  return r;
}
}  // namespace

bool register_task(Task task) {
  registry().push_back(std::move(task));
  return true;
}
const std::vector<Task>& tasks() { return registry(); }

int Session::command(const std::string& name, const Config&) {
  throw config_error("this model has no command '" + name + "'");
}

void add_seed_keys(Schema& s) {
  s.integer("seed", 1, {.min = 0}, "sets every random stream below that is -1", training::Role::run)
      .integer("init_seed", -1, {.min = -1}, "parameter initialisation (-1: seed)", training::Role::run)
      .integer("data_seed", -1, {.min = -1}, "data order and augmentation (-1: seed)", training::Role::run)
      .integer("dropout_seed", -1, {.min = -1}, "dropout masks (-1: seed)", training::Role::run);
}
namespace {
std::uint64_t seed_of(const Config& c, const char* key) {
  const std::int64_t v = c.integer(key);
  return std::uint64_t(v >= 0 ? v : c.integer("seed"));
}
}  // namespace
std::uint64_t init_seed(const Config& c) { return seed_of(c, "init_seed"); }
std::uint64_t data_seed(const Config& c) { return seed_of(c, "data_seed"); }
std::uint64_t dropout_seed(const Config& c) { return seed_of(c, "dropout_seed"); }

Options program_options_named(const Config& c, int threads, std::span<const std::string_view> hyper_names) {
  Options o{.threads = threads, .seed = std::uint64_t(c.integer("seed")), .init_seed = init_seed(c), .dropout_seed = dropout_seed(c)};
  for (std::string_view h : hyper_names)
    if (c.schema().find(h)) o.hypers.emplace_back(std::string(h), c.real(h));
  return o;
}

namespace {
// Memory the system can give now (MemAvailable), or the physical memory when that is unknown.
// The memory this process can still use: the machine's available memory, bounded by a cgroup
// limit (a container) and by the address-space limit (ulimit -v) when they are set.
double available_bytes() {
  double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    double kb = 0;
    while (in >> key >> kb >> unit)
      if (key == "MemAvailable:") {
        have = kb * 1024;
        break;
      }
  }
  double max = 0, current = 0;
  if (std::ifstream m("/sys/fs/cgroup/memory.max"); m >> max)  // "max" (no limit) does not read as a number
    if (std::ifstream c("/sys/fs/cgroup/memory.current"); c >> current) have = std::min(have, max - current);
  if (rlimit r{}; getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
    double used = 0;  // the address space in use now (VmSize)
    std::ifstream st("/proc/self/statm");
    st >> used;
    have = std::min(have, double(r.rlim_cur) - used * double(sysconf(_SC_PAGE_SIZE)));
  }
  return std::max(have, 0.0);
}
std::string gb(double bytes) {
  char b[48];
  const double g = bytes / 1e9;
  std::snprintf(b, sizeof b, g < 100 ? "%.1f GB" : g < 1e9 ? "%.0f GB" : "%.3g GB", g);
  return b;
}
}  // namespace

void check_fits(const Executor<float>& model, std::array<std::int64_t, kMaxSymbols> sym, double extra, const std::string& what) {
  const auto bytes = model.plan_bytes_at(Mode::train, sym);
  const double have = available_bytes();
  if (!bytes) throw config_error(what + ": the activations' size overflows 64 bits");
  const double need = double(*bytes) + extra + double(model.parameter_count()) * 8;
  if (need > have)
    throw config_error(what + " needs " + gb(need) + " for activations, inputs and parameters; " + gb(have) + " of memory is available (free memory, container and ulimit -v limits)");
}

std::string file_hash(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw config_error("cannot read " + file.string());
  std::uint64_t h = 0xcbf29ce484222325ull;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001b3ull;
    if (!in) break;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace ctgrad::cli
