// A run's folder: its checkpoint, tokenizer, metrics and plots, and the rules that keep what a user
// saved: a new run refuses a folder that holds one (unless told to overwrite it), and temporary
// files left by a killed writer are removed before anything is written.
#pragma once
#include <filesystem>
#include <string>

namespace ctgrad::training {

class RunFolder {
 public:
  // A path the file system cannot use (too long, under a file) is a config_error.
  explicit RunFolder(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path checkpoint() const { return dir_ / "checkpoint.safetensors"; }
  std::filesystem::path file(const std::string& name) const { return dir_ / name; }
  bool has_checkpoint() const;

  // For a new run: creates the folder. A folder that already holds a run (a checkpoint, metrics)
  // is refused with a config_error naming it, unless `overwrite`, which deletes the run's files.
  void start_new(bool overwrite) const;
  // For a run that is continued or read: the checkpoint must exist (config_error otherwise).
  void require_checkpoint() const;
  // Removes `.<name>.tmp.<pid>` files whose writer process is gone (a kill -9 mid-save).
  int remove_stale_temporaries() const;

 private:
  std::filesystem::path dir_;
};

}  // namespace ctgrad::training
