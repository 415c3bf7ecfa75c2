#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/data/text.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace ctgrad::data::ende {

namespace {

bool (*g_stop)() = nullptr;
bool stopped() { return g_stop && g_stop(); }

std::vector<char*> c_args(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  return args;
}

// Starts argv with `in` as its standard input (-1: /dev/null), `out` as its standard output and
// `err` as its standard error; `close_fds` are closed in the child.
pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& cwd, int in, int out, int err, std::initializer_list<int> close_fds) {
  if (argv.empty()) throw data_error("ctgrad: run_program: no program");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in < 0) posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);  // never waits on a prompt
  else posix_spawn_file_actions_adddup2(&fa, in, 0);
  posix_spawn_file_actions_adddup2(&fa, out, 1);
  posix_spawn_file_actions_adddup2(&fa, err, 2);
  for (int fd : close_fds) posix_spawn_file_actions_addclose(&fa, fd);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  auto args = c_args(argv);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw data_error("ctgrad: cannot run " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

int wait_status(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

void make_pipe(int fds[2], const std::string& what) {
  if (::pipe2(fds, O_CLOEXEC) != 0) throw data_error("ctgrad: cannot make a pipe for " + what + ": " + std::strerror(errno));
}

// The children asked to stop, then waited for (killed when they do not end within a second).
void stop_children(std::initializer_list<pid_t> pids) {
  for (pid_t p : pids)
    if (p > 0) ::kill(p, SIGTERM);
  for (pid_t p : pids) {
    if (p <= 0) continue;
    int status = 0;
    for (int i = 0; i < 20 && ::waitpid(p, &status, WNOHANG) == 0; ++i) ::usleep(50000);
    if (::waitpid(p, &status, WNOHANG) == 0) ::kill(p, SIGKILL), wait_status(p);
  }
}

// Reads fd to its end into `text`, or into sink (text keeping the last 4 KB). False when the stop
// check said stop before the end.
bool drain(int fd, std::string& text, const Sink& sink) {
  char buf[1 << 16];
  for (;;) {
    if (stopped()) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 200);
    if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (!sink) {
      text.append(buf, std::size_t(n));
      continue;
    }
    sink(std::string_view(buf, std::size_t(n)));
    text.append(buf, std::size_t(n));
    if (text.size() > 8192) text.erase(0, text.size() - 4096);
  }
  return true;
}

}  // namespace

Ran run_program(const std::vector<std::string>& argv, const std::filesystem::path& cwd, const Sink& sink) {
  int out[2];
  make_pipe(out, argv.empty() ? "" : argv[0]);
  pid_t pid = 0;
  try {
    pid = spawn(argv, cwd, -1, out[1], out[1], {});
  } catch (...) {
    ::close(out[0]), ::close(out[1]);
    throw;
  }
  ::close(out[1]);
  Ran r;
  const bool whole = drain(out[0], r.output, sink);
  if (!whole) stop_children({pid});
  ::close(out[0]);
  if (!whole) throw data_error("interrupted");
  r.status = wait_status(pid);
  throw_if_stopped();  // a child the Ctrl-C ended: its failure is not the data's
  return r;
}

Ran run_pipeline(const std::vector<std::string>& first, const std::vector<std::string>& second, const std::filesystem::path& cwd) {
  int link[2], out[2];
  make_pipe(link, first.empty() ? "" : first[0]);
  make_pipe(out, second.empty() ? "" : second[0]);
  pid_t a = -1, b = -1;
  try {
    a = spawn(first, cwd, -1, link[1], out[1], {});
    b = spawn(second, cwd, link[0], out[1], out[1], {});
  } catch (...) {
    for (int fd : {link[0], link[1], out[0], out[1]}) ::close(fd);
    if (a > 0) wait_status(a);
    throw;
  }
  for (int fd : {link[0], link[1], out[1]}) ::close(fd);
  Ran r;
  const bool whole = drain(out[0], r.output, {});
  if (!whole) stop_children({a, b});
  ::close(out[0]);
  if (!whole) throw data_error("interrupted");
  const int sa = wait_status(a), sb = wait_status(b);
  r.status = sa != 0 ? sa : sb;
  throw_if_stopped();
  return r;
}

void set_stop_check(bool (*stop)()) { g_stop = stop; }
void throw_if_stopped() {
  if (stopped()) throw data_error("interrupted");
}

std::string output_tail(const std::string& output) {
  std::string tail = output.substr(output.size() > 200 ? output.size() - 200 : 0);
  for (char& c : tail)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return tail;
}

std::string read_text_file(const std::filesystem::path& p, const std::string& what, std::size_t limit) {
  const auto bytes = checkpoint::read_regular_file(p, "ctgrad: " + what, limit);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::string run_checked(const std::vector<std::string>& argv, const std::string& what, const std::filesystem::path& cwd) {
  Ran r = run_program(argv, cwd);
  if (r.status != 0) {
    const std::string tail = output_tail(r.output);
    throw data_error("ctgrad: " + what + " failed (exit " + std::to_string(r.status) + ")" + (tail.empty() ? "" : ": ..." + tail));
  }
  return std::move(r.output);
}

}  // namespace ctgrad::data::ende
