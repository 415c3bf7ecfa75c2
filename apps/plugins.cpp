#include "plugins.hpp"

#include <dlfcn.h>
#include <elf.h>
#include "plugin_hash.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "git_commit.h"
#include <ctgrad/training/escape.hpp>

#include "task.hpp"

namespace ctgrad::cli {

namespace {
namespace fs = std::filesystem;

// Every plug-in the full build makes, with the models it registers (a model's name: its task).
const std::vector<std::pair<std::string, std::vector<std::string>>> kPlugins = {
    {"ctgrad-transformer", {"transformer"}}, {"ctgrad-vit", {"vit"}},        {"ctgrad-bert", {"bert", "bert-finetune"}},
    {"ctgrad-t5", {"t5", "t5-finetune"}},    {"ctgrad-llama", {"llama"}},
    {"ctgrad-seq2seq", {"seq2seq"}},
};

enum class State { absent, loaded, stale, failed };
struct Status {
  State state = State::absent;
  std::string why;  // stale, failed: what the file is, in a few words
};
int g_loading = 0;
std::vector<int> g_rejected;

std::map<std::string, Status>& status() {
  static std::map<std::string, Status> s;
  return s;
}

fs::path plugin_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path() / "plugins";
}

// The commit a stamp or a marker names: what follows CTGRAD_GIT_COMMIT, in quotes.
std::string commit_of(std::string text) {
  const auto q = text.find('"');
  if (q != std::string::npos) text = text.substr(q + 1, text.find('"', q + 1) - q - 1);
  text = training::printable(text.substr(0, 60));
  return text.empty() ? "no commit" : text;
}

// The stamp's last line for a file: its XXH3-128, as ctgrad-plugin-stamp writes it.
std::string content_line(const fs::path& file) {
  std::ifstream f(file, std::ios::binary);
  return cli::content_line(f);
}

// Why the stamp beside a plug-in does not match this build and the plug-in's bytes ("" when it
// does). A stamp is a small regular file (a FIFO or a device in its place is not read: no hang, no
// flood); a plug-in whose bytes changed since its build (cut, damaged) would crash in dlopen.
std::string stamp_problem(const fs::path& so, const fs::path& p, const std::string& mine) {
  std::error_code ec;
  const auto st = fs::symlink_status(p, ec);
  if (!fs::exists(st)) return "it has no stamp " + p.filename().string() + ": its build did not finish";
  if (!fs::is_regular_file(fs::status(p, ec))) return "its stamp " + p.filename().string() + " is not a regular file";
  if (fs::file_size(p, ec) > 4096 || ec) return "its stamp " + p.filename().string() + " is not one the build wrote";
  std::ifstream f(p);
  std::stringstream in;
  in << f.rdbuf();
  const std::string text = in.str();
  if (text.rfind(mine, 0) != 0) return "it was built from another state of the source (" + commit_of(text) + "; this command: " + commit_of(mine) + ")";
  if (text.substr(mine.size()) != content_line(so)) return "its bytes are not the ones its build wrote (damaged or changed since): rebuild it";
  return "";
}

// Why a file cannot be a loadable plug-in of this machine ("" when its ELF headers hold): a file
// cut short (a build or a copy that stopped) would be mapped by dlopen past its end, and a read
// there kills the process (SIGBUS) in every command.
std::string elf_problem(const fs::path& file) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  std::ifstream f(file, std::ios::binary);
  Elf64_Ehdr h{};
  if (ec || !f.read(reinterpret_cast<char*>(&h), sizeof h)) return "it is not a shared library (" + std::to_string(size) + " bytes)";
  if (size > (std::uintmax_t(1) << 30)) return "it is larger than any plug-in the build writes (" + std::to_string(size >> 20) + " MiB)";
  if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_type != ET_DYN) return "it is not a 64-bit shared library";
#if defined(__x86_64__)
  if (h.e_machine != EM_X86_64) return "it is a shared library for another processor";
#elif defined(__aarch64__)
  if (h.e_machine != EM_AARCH64) return "it is a shared library for another processor";
#endif
  const auto within = [&](std::uint64_t offset, std::uint64_t bytes) { return offset <= size && bytes <= size - offset; };
  if (h.e_phentsize != sizeof(Elf64_Phdr) || !within(h.e_phoff, std::uint64_t(h.e_phnum) * sizeof(Elf64_Phdr)) ||
      (h.e_shoff != 0 && !within(h.e_shoff, std::uint64_t(h.e_shnum) * h.e_shentsize)))
    return "it is cut short (" + std::to_string(size) + " bytes): rebuild it";
  std::vector<Elf64_Phdr> ph(h.e_phnum);
  f.seekg(std::streamoff(h.e_phoff));
  if (!f.read(reinterpret_cast<char*>(ph.data()), std::streamsize(ph.size() * sizeof(Elf64_Phdr)))) return "it is cut short: rebuild it";
  for (const Elf64_Phdr& p : ph)
    if (p.p_type == PT_LOAD && !within(p.p_offset, p.p_filesz)) return "it is cut short (" + std::to_string(size) + " bytes): rebuild it";
  return "";
}

std::string target_hint(const std::string& name) {
  const Status& s = status()[name];
  const fs::path file = plugin_dir() / (name + ".so");
  std::string why;
  if (s.state == State::stale || s.state == State::failed) why = " (" + training::printable(file.string()) + " was not loaded: " + s.why + ")";
  return "cmake --build build --target " + name + " (or build everything: cmake --build build)" + why;
}

std::string list(const std::vector<std::string>& names) {
  std::string l;
  for (const auto& n : names) l += (l.empty() ? "" : ", ") + n;
  return l.empty() ? "none" : l;
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
    if (dir.empty() || !fs::exists(fs::symlink_status(file, ec))) continue;
    Status& s = status()[name];
    s.state = State::stale;
    if (!fs::is_regular_file(file, ec)) s.why = "it is not a regular file";
    else if (s.why = elf_problem(file); s.why.empty()) s.why = stamp_problem(file, file.string() + ".stamp", mine);
    if (!s.why.empty()) continue;
    // RTLD_NOW: a missing symbol is found here, not mid-run; the plug-in's tasks
    // register themselves (its static initializers) into this process's registries.
    const std::size_t before = tasks().size();
    static int loaded_so_far = 0;
    g_loading = ++loaded_so_far;
    void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    const int plugin = g_loading;
    g_loading = 0;
    s.state = State::failed;
    if (!handle) {
      const char* e = ::dlerror();
      s.why = training::printable(e ? e : "unknown error");
      continue;
    }
    // The file is a plug-in of this source state, and it brought its models, no other.
    const auto* marker = static_cast<const char*>(::dlsym(handle, "ctgrad_plugin_commit"));
    std::vector<std::string> brought;
    for (std::size_t i = before; i < tasks().size(); ++i) brought.push_back(tasks()[i].name);
    if (!marker) s.why = "it is not a ctgrad plug-in (it has no ctgrad_plugin_commit)";
    else if (std::string(marker) != CTGRAD_GIT_COMMIT)
      s.why = "it was built from another state of the source (" + commit_of("\"" + std::string(marker) + "\"") + "; this command: " + commit_of(mine) + ")";
    else if (brought != models) s.why = "it holds the models " + list(brought) + ", not " + list(models);
    else s.state = State::loaded;
    if (s.state != State::loaded) {  // (its code stays mapped: what it registered may point into it)
      forget_tasks_after(before);
      g_rejected.push_back(plugin);
    }
  }
}

int loading_plugin() { return g_loading; }
bool plugin_rejected(int plugin) { return plugin != 0 && std::find(g_rejected.begin(), g_rejected.end(), plugin) != g_rejected.end(); }

std::string missing_model_hint(const std::string& model) {
  for (const auto& [name, models] : kPlugins)
    if (std::find(models.begin(), models.end(), model) != models.end())
      return "the model '" + model + "' is not in this build of the command: build it with " + target_hint(name);
  return "";
}

std::string models_not_built() {
  std::string absent, unloaded;
  for (const auto& [name, models] : kPlugins) {
    const Status& s = status()[name];
    if (s.state == State::loaded) continue;
    const std::string what = list(models);
    if (s.state == State::absent) absent += (absent.empty() ? "" : ", ") + what;
    else unloaded += "; " + what + " (" + training::printable((plugin_dir() / (name + ".so")).string()) + " was not loaded: " + s.why + ")";
  }
  if (absent.empty() && unloaded.empty()) return "";
  return (absent.empty() ? "" : absent + " (not in this build: cmake --build build builds them)") + (absent.empty() ? unloaded.substr(2) : unloaded);
}

}  // namespace ctgrad::cli
