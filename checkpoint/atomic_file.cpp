#include <ctgrad/checkpoint/atomic_file.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ctgrad::checkpoint {
namespace {
void write_all(int fd, const std::byte* p, std::size_t n, const std::string& tmp) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("ctgrad: writing " + tmp + ": " + std::strerror(errno));
    }
    p += w, n -= std::size_t(w);
  }
}
}  // namespace

int create_temporary(const std::filesystem::path& target, std::string& tmp) {
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  // A name of this call alone: two threads of one process saving the same file at once each
  // write their own temporary file (the last rename wins, whole), and O_EXCL never reuses one
  // that a dead process with the same pid left behind, nor opens a link or a FIFO put there.
  // The target's name is cut to 200 bytes in the temporary one, which then stays within NAME_MAX
  // (255) for any target name that fits (the pid and n add up to 34 bytes).
  static std::atomic<std::uint64_t> writes{0};
  const std::string name = target.filename().string().substr(0, 200);
  auto next_name = [&] {
    std::string file = ".";  // appended piecewise: GCC 12 warns (falsely) on "." + std::string
    file.append(name).append(".tmp.").append(std::to_string(::getpid())).append(".").append(std::to_string(writes++));
    tmp = (dir / file).string();
  };
  // Made unnamed (O_TMPFILE) and locked before it gets its name (linkat, which never replaces a
  // file, a link or a FIFO there): no cleaner ever finds it unlocked. Where the file system or
  // /proc cannot do that, it is made by name and locked at once.
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::flock(fd, LOCK_EX | LOCK_NB);
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    for (;;) {
      next_name();
      if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) == 0) return fd;
      if (errno != EEXIST) break;
    }
    ::close(fd);
  }
  do {
    next_name();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EEXIST);
  if (fd < 0) throw std::runtime_error("ctgrad: cannot create " + tmp + ": " + std::strerror(errno));
  ::flock(fd, LOCK_EX | LOCK_NB);  // a new file: no one else holds it (a file system without locks: no lock, the pid still says)
  return fd;
}

bool is_temporary_name(const std::string& name, long& pid) {
  const auto at = name.rfind(".tmp.");
  if (name.size() < 2 || name[0] != '.' || at == std::string::npos || at <= 1) return false;
  const std::string rest = name.substr(at + 5);
  const auto dot = rest.find('.');
  if (dot == std::string::npos) return false;
  const std::string digits = rest.substr(0, dot), n = rest.substr(dot + 1);
  auto all_digits = [](const std::string& d) { return !d.empty() && d.size() <= 19 && d.find_first_not_of("0123456789") == std::string::npos; };
  if (!all_digits(digits) || !all_digits(n) || digits.size() > 10) return false;
  static const long pid_max = [] {  // a number past it is no process's: a user's name (".notes.tmp.20240501.1")
    long v = 4194304;  // Linux's largest
    if (std::FILE* f = std::fopen("/proc/sys/kernel/pid_max", "r")) {
      if (std::fscanf(f, "%ld", &v) != 1) v = 4194304;
      std::fclose(f);
    }
    return v;
  }();
  pid = std::stol(digits);
  return pid > 0 && pid < pid_max;
}

int remove_stale_temporaries(const std::filesystem::path& dir, const std::function<bool(const std::string&)>& owned) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    long pid = 0;
    if (!is_temporary_name(name, pid)) continue;
    std::string of = name.substr(1, name.rfind(".tmp.") - 1);
    for (const std::string side : {".gp", ".err"})  // gnuplot's script and output beside a plot
      if (of.size() > side.size() && of.compare(of.size() - side.size(), side.size(), side) == 0) of.resize(of.size() - side.size());
    if (!owned(of)) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    // Its writer, alive, holds its lock (from any pid namespace: another container's writer); a
    // pid alive here may be its writer's too.
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      removed += std::filesystem::remove(e.path(), ec) ? 1 : 0;
    ::close(fd);
  }
  return removed;
}

void write_atomically(const std::filesystem::path& path, std::span<const std::span<const std::byte>> parts) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string tmp;
  const int fd = create_temporary(path, tmp);
  try {
    for (const auto& part : parts) write_all(fd, part.data(), part.size(), tmp);
    if (::fsync(fd) != 0) throw std::runtime_error("ctgrad: flushing " + tmp + " to disk: " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    std::remove(tmp.c_str());
    throw;
  }
  // Renamed while still open: its lock keeps a cleaner from taking it as a dead writer's until
  // it has its name. (It is flushed to disk: closing it checks nothing more of the data.)
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // atomic on POSIX within one file system
  if (ec) {
    ::close(fd);
    std::remove(tmp.c_str());
    throw std::runtime_error("ctgrad: cannot move " + tmp + " to " + path.string() + ": " + ec.message());
  }
  if (::close(fd) != 0) throw std::runtime_error("ctgrad: closing " + path.string() + ": " + std::strerror(errno));
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {  // make the rename durable
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_atomically(const std::filesystem::path& path, std::string_view text) {
  const std::span<const std::byte> part(reinterpret_cast<const std::byte*>(text.data()), text.size());
  write_atomically(path, std::span<const std::span<const std::byte>>(&part, 1));
}

namespace {
std::uint64_t mix(std::uint64_t h, std::uint64_t w) {
  h = (h ^ w) * 0x100000001b3ull;
  return h ^ (h >> 29);
}
}  // namespace

void Checksum::add(std::span<const std::byte> bytes) {
  std::size_t i = 0;
  while (n_pending_ > 0 && n_pending_ < 8 && i < bytes.size()) pending_[n_pending_++] = bytes[i++];
  if (n_pending_ == 8) {
    std::uint64_t w;
    std::memcpy(&w, pending_, 8);
    h_ = mix(h_, w), n_pending_ = 0;
  }
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h_ = mix(h_, w);
  }
  for (; i < bytes.size(); ++i) pending_[n_pending_++] = bytes[i];
}

std::string Checksum::hex() const {
  std::uint64_t h = h_;
  for (std::size_t i = 0; i < n_pending_; ++i) h = (h ^ std::uint64_t(pending_[i])) * 0x100000001b3ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string checksum(std::span<const std::byte> bytes) {
  Checksum c;
  c.add(bytes);
  return c.hex();
}

}  // namespace ctgrad::checkpoint
