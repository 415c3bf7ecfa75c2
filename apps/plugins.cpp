#include "plugins.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "git_commit.h"
#include "task.hpp"

namespace ctgrad::cli {

namespace {
namespace fs = std::filesystem;

// Every plug-in the full build makes, with the models it registers (a model's name: its task).
const std::vector<std::pair<std::string, std::vector<std::string>>> kPlugins = {
    {"ctgrad-transformer", {"transformer"}}, {"ctgrad-vit", {"vit"}},        {"ctgrad-bert", {"bert", "bert-finetune"}},
    {"ctgrad-t5", {"t5", "t5-finetune"}},    {"ctgrad-gpt-variants", {}},
};

enum class State { absent, loaded, stale, failed };
struct Status {
  State state = State::absent;
  std::string why;  // failed: dlerror()
};
std::map<std::string, Status>& status() {
  static std::map<std::string, Status> s;
  return s;
}

fs::path plugin_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path() / "plugins";
}

// A stamp is a small regular file (a FIFO or a device in its place is not read: no hang, no flood).
std::string read_stamp(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) > 4096 || ec) return "";
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string target_hint(const std::string& name) {
  const Status& s = status()[name];
  const fs::path file = plugin_dir() / (name + ".so");
  std::string why;
  if (s.state == State::stale) why = " (" + file.string() + " was built from another state of the source)";
  if (s.state == State::failed) why = " (" + file.string() + " did not load: " + s.why + ")";
  return "cmake --build build --target " + name + " (or build everything: cmake --build build)" + why;
}
}  // namespace

void load_plugins() {
  static bool done = false;
  if (done) return;
  done = true;
  const fs::path dir = plugin_dir();
  // The stamp is the text of git_commit.h the plug-in was built with; the command's is the same text.
  const std::string mine = std::string("#define CTGRAD_GIT_COMMIT \"") + CTGRAD_GIT_COMMIT + "\"\n";
  for (const auto& [name, models] : kPlugins) {
    const fs::path file = dir / (name + ".so");
    std::error_code ec;
    if (dir.empty() || !fs::is_regular_file(file, ec)) continue;
    Status& s = status()[name];
    if (read_stamp(file.string() + ".stamp") != mine) {
      s.state = State::stale;
      continue;
    }
    // RTLD_NOW: a missing symbol is found here, not mid-run; the plug-in's tasks and variants
    // register themselves (its static initializers) into this process's registries.
    if (::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      s.state = State::loaded;
    } else {
      s.state = State::failed;
      const char* e = ::dlerror();
      s.why = e ? e : "unknown error";
    }
  }
}

std::string missing_model_hint(const std::string& model) {
  for (const auto& [name, models] : kPlugins)
    if (std::find(models.begin(), models.end(), model) != models.end())
      return "the model '" + model + "' is not in this build of the command: build it with " + target_hint(name);
  return "";
}

std::string missing_variants_hint(const std::string& model) {
  const std::string name = "ctgrad-" + model + "-variants";
  const bool exists = std::any_of(kPlugins.begin(), kPlugins.end(), [&](const auto& p) { return p.first == name; });
  if (!exists || status()[name].state == State::loaded) return "";
  return "; this build has each preset's own architecture only, the other variants are built by " + target_hint(name);
}

std::string models_not_built() {
  std::string list;
  for (const auto& [name, models] : kPlugins)
    if (status()[name].state != State::loaded)
      for (const std::string& m : models) list += (list.empty() ? "" : ", ") + m;
  return list.empty() ? "" : list + " (not in this build: cmake --build build builds them)";
}

}  // namespace ctgrad::cli
