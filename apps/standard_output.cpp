#include "standard_output.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <stdio_ext.h>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ctgrad::cli {

namespace {
std::atomic<bool> g_broken_pipe{false};  // a write to standard output failed with EPIPE
extern "C" void on_sigpipe(int) {}        // the write that raised it fails with EPIPE and says which stream
}  // namespace

void catch_broken_pipe() {
  struct sigaction sa {};
  sa.sa_handler = on_sigpipe;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
}

bool stdout_reader_gone() {
  if (g_broken_pipe) return true;
  struct stat st {};
  if (::fstat(1, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return false;
  pollfd p{1, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

bool write_stdout(std::string_view text) {
  if (g_broken_pipe) return false;
  errno = 0;
  const bool ok = std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
  if (ok) return true;
  const int err = errno;
  if (err == EPIPE || stdout_reader_gone()) return g_broken_pipe = true, false;
  __fpurge(stdout), std::clearerr(stdout);  // said here, once: not again when the command ends
  throw std::runtime_error(std::string("cannot write standard output") + (err ? std::string(": ") + std::strerror(err) : std::string()));
}

}  // namespace ctgrad::cli
