#include <ctgrad/training/config.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/folder_lock.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ctgrad::training {

FolderLock::FolderLock(const std::filesystem::path& dir, const std::string& file, const std::string& folder_kind, const std::string& holder_kind) {
  const std::filesystem::path path = dir / file;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);  // not inherited by the runs
  if (fd_ < 0) {
    const int err = errno;
    if (err == ELOOP) throw config_error(printable(path.string()) + " is a symbolic link, not ctgrad's lock file: move it away");
    throw config_error("cannot open " + printable(path.string()) + ": " + std::strerror(err));
  }
  // A lock is the file's inode: one with other names (a hard link, as `cp -al` makes one) would be
  // shared with another folder, and its pid written over a file of the user's.
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    const bool linked = S_ISREG(st.st_mode) && st.st_nlink > 1;
    ::close(fd_);
    if (linked)
      throw config_error(printable(path.string()) + " has " + std::to_string(st.st_nlink) +
                         " names (a hard link, as cp -al makes): not this folder's own lock file; remove it (ctgrad makes its own)");
    throw config_error(printable(path.string()) + " is not a regular file, not ctgrad's lock file: move it away");
  }
  // ctgrad's lock holds "<pid>\n<pid namespace inode>\n" (an older one the pid alone), or nothing:
  // a file of that name holding anything else is a user's, kept. A pid of another pid namespace
  // (another container's) is not this one's process: it is said, not named as one to stop.
  char text[64] = {0};
  const ssize_t n = st.st_size <= 32 ? ::pread(fd_, text, sizeof text - 1, 0) : -1;
  const std::string held = n >= 0 ? std::string(text, std::size_t(n)) : std::string();
  if (n < 0 || held.find_first_not_of("0123456789\n") != std::string::npos) {
    ::close(fd_);
    throw config_error(printable(path.string()) + " holds something other than a pid: not ctgrad's lock file; move it away");
  }
  auto my_namespace = [] {
    struct stat ns {};
    return ::stat("/proc/self/ns/pid", &ns) == 0 ? std::to_string(ns.st_ino) : std::string();
  };
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    const auto nl = held.find('\n');
    const std::string pid = held.substr(0, nl);
    const std::string ns = nl == std::string::npos ? "" : held.substr(nl + 1, held.find('\n', nl + 1) - nl - 1);
    const std::string who = pid.empty() ? "" : ns.empty() || ns == my_namespace() ? " (pid " + pid + ")" : " (in another pid namespace, a container's)";
    if (err == EWOULDBLOCK)
      throw config_error(folder_kind + " " + printable(dir.string()) + " is in use by " + holder_kind + who + ": wait for it to end, or stop it");
    throw config_error("cannot lock " + printable(path.string()) + ": " + std::strerror(err));
  }
  const std::string me = std::to_string(::getpid()) + "\n" + my_namespace() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
  }  // the pid is information only
}

FolderLock::~FolderLock() { ::close(fd_); }

}  // namespace ctgrad::training
