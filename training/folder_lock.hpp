// An exclusive lock on a folder for one process: flock on a file in it that holds the holder's
// pid. The kernel releases it when the process ends, however it ends (kill -9 included), and the
// file is not inherited by child processes. A second locker is refused with a config_error naming
// the holder ("the study folder S is in use by another ctgrad ablate (pid 123): ...").
#pragma once
#include <filesystem>
#include <string>

namespace ctgrad::training {

class FolderLock {
 public:
  // `file`: the lock's name in `dir` (which must exist); `what`: the folder and its user, for the
  // message ("the study folder", "another ctgrad ablate").
  FolderLock(const std::filesystem::path& dir, const std::string& file, const std::string& folder_kind, const std::string& holder_kind);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace ctgrad::training
