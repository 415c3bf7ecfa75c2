#include <ctgrad/training/config.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/folder_lock.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {0};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    std::string holder = n > 0 ? std::string(pid, std::size_t(n)) : "";
    holder.erase(std::remove_if(holder.begin(), holder.end(), [](char c) { return c < '0' || c > '9'; }), holder.end());
    ::close(fd_);
    if (err == EWOULDBLOCK)
      throw config_error(folder_kind + " " + printable(dir.string()) + " is in use by " + holder_kind + (holder.empty() ? "" : " (pid " + holder + ")") +
                         ": wait for it to end, or stop it");
    throw config_error("cannot lock " + printable(path.string()) + ": " + std::strerror(err));
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
  }  // the pid is information only
}

FolderLock::~FolderLock() { ::close(fd_); }

}  // namespace ctgrad::training
