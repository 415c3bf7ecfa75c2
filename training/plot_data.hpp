// Files a run writes beside its results (the numbers a gnuplot script reads, a log of its own) at
// names a user or another process may have put something at: never through a link, never into a
// FIFO or a device, never over a user's file.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <ctgrad/training/escape.hpp>

namespace ctgrad::training {

// `text` in a new hidden file of its own in `folder` (mkstemp: O_EXCL), removed when this ends.
class PlotData {
 public:
  PlotData(const std::filesystem::path& folder, const std::string& text) {
    std::string name = (folder / ".plot-data.XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw std::runtime_error("cannot write in " + printable(folder.string()) + ": " + std::strerror(errno));
    path_ = name;
    const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    const int err = errno;
    ::close(fd);
    if (!ok) {
      std::filesystem::remove(path_);
      throw std::runtime_error("cannot write in " + printable(folder.string()) + ": " + std::strerror(err));
    }
  }
  ~PlotData() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  PlotData(const PlotData&) = delete;
  PlotData& operator=(const PlotData&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Opens the regular file `p` (made when missing) for appending: its descriptor, or -1 with the
// reason in `why` when `p` is a link (symbolic or hard: the write would reach another name's file),
// a FIFO, a device or a folder. Writes on it block again as usual.
inline int open_for_append(const std::filesystem::path& p, std::string& why) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    why = errno == ELOOP ? "it is a symbolic link" : errno == ENXIO ? "it is not a regular file (a FIFO)" : std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    why = S_ISREG(st.st_mode) && st.st_nlink > 1 ? "it is a hard link of another file" : "it is not a regular file";
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, O_APPEND);
  return fd;
}

// Appends `line` to `p` as open_for_append opens it; false, with nothing written and the reason
// in `why`, when it refuses or the write fails.
inline bool append_to_regular_file(const std::filesystem::path& p, const std::string& line, std::string& why) {
  const int fd = open_for_append(p, why);
  if (fd < 0) return false;
  const bool ok = ::write(fd, line.data(), line.size()) == ssize_t(line.size());
  if (!ok) why = std::strerror(errno);
  ::close(fd);
  return ok;
}

}  // namespace ctgrad::training
