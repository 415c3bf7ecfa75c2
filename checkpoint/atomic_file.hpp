// Writing a file so that what a user saved is never lost: the bytes go to a temporary file of this
// write alone in the same folder (".<name>.tmp.<pid>.<n>", n counting the process's writes, made
// with O_EXCL), which is written, checked, flushed to disk (fsync) and closed before it is renamed
// over the target, and the folder is synced so the rename survives a crash.
// A full disk, a kill or a power cut mid-write leaves the previous file whole; an error names the
// file and the reason, and the temporary file is removed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <filesystem>
#include <functional>
#include <span>
#include <string_view>

namespace ctgrad::checkpoint {

// The parts are written one after the other.
void write_atomically(const std::filesystem::path& path, std::span<const std::span<const std::byte>> parts);
void write_atomically(const std::filesystem::path& path, std::string_view text);

// A new empty file beside `target`, named ".<target's name>.tmp.<pid>.<n>" and made with O_EXCL
// (never an existing file, a link or a FIFO): its descriptor, its path in `tmp`. The descriptor
// holds an exclusive lock (flock) on it: while it is open the file is a live writer's, whatever
// pid namespace a cleaner runs in. Keep it open until the file has its final name or is removed.
int create_temporary(const std::filesystem::path& target, std::string& tmp);
// Whether `name` is such a temporary file's name, of a pid a process can have, and of which pid.
bool is_temporary_name(const std::string& name, long& pid);
// Removes the temporary files in `dir` of targets `owned` names (a plot's ".gp" and ".err" files
// count as the plot's) whose writer is gone: regular files whose lock no one holds, of a pid that
// is no process here. How many.
int remove_stale_temporaries(const std::filesystem::path& dir, const std::function<bool(const std::string&)>& owned);

// A 64-bit checksum of bytes (FNV-1a over 8-byte words, then the tail), as 16 hex digits: what a
// checkpoint records of its data so that a flipped byte is an error, not a different model. The
// bytes may come in pieces; the result is that of their concatenation.
class Checksum {
 public:
  void add(std::span<const std::byte> bytes);
  std::string hex() const;

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ull;
  std::byte pending_[8]{};
  std::size_t n_pending_ = 0;
};
std::string checksum(std::span<const std::byte> bytes);

}  // namespace ctgrad::checkpoint
