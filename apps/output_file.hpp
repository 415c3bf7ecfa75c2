// A file a command writes at a path the user names (export-batches --out): checked before the work,
// so that a name the file system refuses fails at once, a hidden name (ctgrad's temporaries) is
// refused, a file of the run itself (its tokenizer, checkpoints, metrics) is refused, and a file
// already there (a user's) is kept unless the user says --overwrite.
#pragma once
#include <climits>
#include <filesystem>
#include <string>

#include <ctgrad/training/config.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/run_folder.hpp>

#include "option_text.hpp"

namespace ctgrad::cli {

inline void check_output_file(const std::filesystem::path& p, const std::string& option, bool overwrite, const training::RunFolder& run) {
  namespace fs = std::filesystem;
  one_line(option, p.string());  // UTF-8, no control character: the name is shown on the terminal
  const std::string full = p.string();  // a long one by its start and its end (a suffix the command adds)
  const std::string shown = training::printable(full.size() <= 200 ? full : full.substr(0, 150) + "..." + full.substr(full.size() - 40));
  if (p.empty() || p.filename().empty()) throw training::config_error(option + " needs a file name, got '" + shown + "'");
  if (p.filename().string()[0] == '.')  // `.<name>.tmp.<pid>` is a writer's temporary: the next command in the folder removes it
    throw training::config_error(option + " " + shown + ": a hidden name (a leading '.') is kept for ctgrad's temporary files: give another " + option);
  if (p.filename().string().size() > NAME_MAX)
    throw training::config_error(option + " " + shown + ": a name of " + std::to_string(p.filename().string().size()) + " bytes, past the system's limit of " +
                                 std::to_string(NAME_MAX));
  if (p.string().size() + 64 >= PATH_MAX) throw training::config_error(option + " " + shown + ": the path is too long for the system");
  std::error_code ec;
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir, ec)) throw training::config_error(option + " " + shown + ": the folder " + training::printable(dir.string()) + " does not exist");
  // A file of the run itself (its tokenizer, checkpoints, metrics): the run needs it as it is.
  const std::string name = p.filename().string();
  const bool safetensors = name.size() > 12 && name.substr(name.size() - 12) == ".safetensors";  // averaged ones are the user's to name
  const bool run_file = (safetensors ? name.rfind("checkpoint", 0) == 0 : training::RunFolder::is_run_file(name)) || name == "result.json" ||
                        name == "failed.json" || name == "train.log";  // (the last three: a study's, beside its runs' files)
  for (const fs::path& folder : {run.dir(), run.checkpoint().parent_path().empty() ? fs::path(".") : run.checkpoint().parent_path()})
    if (run_file && fs::equivalent(dir, folder, ec))
      throw training::config_error(option + " " + shown + " is a file of the run in " + training::printable(folder.string()) + ", which it needs: give another " +
                                   option);
  const auto st = fs::symlink_status(p, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_regular_file(st)) throw training::config_error(option + " " + shown + " exists and is not a regular file: give another " + option);
  if (fs::equivalent(p, run.checkpoint(), ec)) throw training::config_error(option + " " + shown + " is the run's checkpoint: give another " + option);
  if (!overwrite) throw training::config_error(option + " " + shown + " exists: add --overwrite to replace it, or give another " + option);
}

}  // namespace ctgrad::cli
