// A run's folder: its checkpoint, tokenizer, metrics and plots, and the rules that keep what a user
// saved: a new run refuses a folder that holds one (unless told to overwrite it), and temporary
// files left by a killed writer are removed before anything is written.
#pragma once
#include <filesystem>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ctgrad::training {

class RunFolder {
 public:
  // The longest name of a file a run writes, temporaries included (write_atomically adds 34 bytes).
  static constexpr std::size_t kLongestFileName = 80;
  // A path the file system cannot use (too long, under a file) is a config_error.
  explicit RunFolder(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path checkpoint() const { return checkpoint_.empty() ? dir_ / "checkpoint.safetensors" : checkpoint_; }
  // Reads another checkpoint of the folder instead (eval of an averaged checkpoint).
  void use_checkpoint(std::filesystem::path file) { checkpoint_ = std::move(file); }
  std::filesystem::path file(const std::string& name) const { return dir_ / name; }
  bool has_checkpoint() const;
  // The checkpoints kept for averaging (LoopOptions::keep_checkpoints): checkpoint-<step>.safetensors,
  // by step, oldest first.
  std::filesystem::path kept_checkpoint(std::int64_t step) const;
  std::vector<std::pair<std::int64_t, std::filesystem::path>> kept_checkpoints() const;

  // Whether `name` is a file a run writes (its checkpoints, tokenizer, metrics, plots, run.json):
  // what a new run replaces. Anything else in the folder is left alone.
  static bool is_run_file(const std::string& name);

  // For a new run: creates the folder. A folder that already holds a run (a checkpoint, metrics)
  // is refused with a config_error naming it, unless `overwrite`, which deletes the run's files.
  // Temporaries of the run's files whose writer is gone go too (a run killed before its first
  // checkpoint leaves no checkpoint to say the folder is a run's).
  // A folder the run reads from (`inputs`: what, path; a pretrained run) is refused in any case,
  // and so is one inside a folder of data (an input whose `what` ends with "data").
  void start_new(bool overwrite, const std::vector<std::pair<std::string, std::filesystem::path>>& inputs = {}) const;
  // start_new's refusals of `inputs` alone, before anything is made (the folder, its lock).
  void check_inputs(bool overwrite, const std::vector<std::pair<std::string, std::filesystem::path>>& inputs) const;
  // For a run that is continued or read: the checkpoint must exist (config_error otherwise).
  // Temporaries of the run's files whose writer is gone go, in a folder holding its checkpoint.
  void require_checkpoint() const;

 private:
  // Removes the run's own files' temporaries (`.<name>.tmp.<pid>.<n>`) whose writer is gone (a
  // kill -9 mid-save).
  int remove_dead_writers_temporaries() const;
  void start_checked(bool overwrite) const;  // start_new once its inputs are checked

  std::filesystem::path dir_, checkpoint_;
};

}  // namespace ctgrad::training
