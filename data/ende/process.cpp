#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/data/text.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace ctgrad::data::ende {

Ran run_program(const std::vector<std::string>& argv, const std::filesystem::path& cwd) {
  if (argv.empty()) throw data_error("ctgrad: run_program: no program");
  int out[2];
  if (::pipe(out) != 0) throw data_error("ctgrad: cannot make a pipe for " + argv[0] + ": " + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);  // never waits on a prompt
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  posix_spawn_file_actions_addclose(&fa, out[1]);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    throw data_error("ctgrad: cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  Ran r;
  char buf[1 << 15];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n > 0) r.output.append(buf, std::size_t(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  return r;
}

std::string run_checked(const std::vector<std::string>& argv, const std::string& what, const std::filesystem::path& cwd) {
  Ran r = run_program(argv, cwd);
  if (r.status != 0) {
    std::string tail = r.output.substr(r.output.size() > 200 ? r.output.size() - 200 : 0);
    for (char& c : tail)
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    throw data_error("ctgrad: " + what + " failed (exit " + std::to_string(r.status) + ")" + (tail.empty() ? "" : ": ..." + tail));
  }
  return std::move(r.output);
}

}  // namespace ctgrad::data::ende
