// A scratch folder for one test process, removed when the process exits (a forked child that
// ends with _exit leaves it to its parent).
#pragma once
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace ctgrad::testing {

inline std::filesystem::path scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    pid_t owner = ::getpid();
    Dir() {
      std::string tmpl = (std::filesystem::temp_directory_path() / "ctgrad-test-XXXXXX").string();
      if (!::mkdtemp(tmpl.data())) throw std::runtime_error("cannot make a scratch folder in " + std::filesystem::temp_directory_path().string());
      path = tmpl;
    }
    ~Dir() {
      std::error_code ec;
      if (::getpid() == owner) std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

inline std::filesystem::path scratch(const std::string& name) { return scratch_dir() / name; }

// A pid no process has now (for names of a dead writer's temporary files).
inline pid_t dead_pid() {
  pid_t p = 30000;
  while (p > 300 && !(::kill(p, 0) != 0 && errno == ESRCH)) --p;
  return p;
}

}  // namespace ctgrad::testing
