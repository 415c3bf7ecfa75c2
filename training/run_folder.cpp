#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/training/config.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/run_folder.hpp>

#include <cstdio>

#include <climits>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <vector>

namespace ctgrad::training {
namespace fs = std::filesystem;

bool RunFolder::is_run_file(const std::string& name) {
  // Any *.safetensors: the checkpoint, kept ones (checkpoint-<step>) and averaged ones.
  return (name.size() > 12 && name.substr(name.size() - 12) == ".safetensors") || name == "metrics.jsonl" || name == "metrics.csv" || name == "loss.png" ||
         name == "epochs.jsonl" || name == "predictions.png" || name == "run.json" || name == "tokenizer.json" || name == "tokenizer.model" ||
         name == "tokenizer.vocab" || name == "sample.txt";
}

RunFolder::RunFolder(fs::path dir) : dir_(std::move(dir)) {
  // A path the file system refuses (too long, a file as a parent) is bad input, named briefly.
  const std::string shown = shortened(dir_.string(), 80);
  std::error_code ec;
  (void)fs::status(dir_, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) throw config_error("the run folder " + shown + ": " + ec.message());
  // Every file a run writes must fit too, found now rather than at the first checkpoint: the
  // longest name, a temporary of a kept checkpoint (.checkpoint-00000100.safetensors.tmp.<pid>.<n>),
  // is at most kLongestFileName bytes.
  const std::size_t longest = dir_.string().size() + 1 + kLongestFileName;
  if (longest >= PATH_MAX)
    throw config_error("the run folder " + shown + " is too long: the paths of the files in it would be up to " + std::to_string(longest) +
                       " bytes, past the system's limit of " + std::to_string(PATH_MAX - 1));
  for (const auto& part : dir_)
    if (part.string().size() > NAME_MAX)
      throw config_error("the run folder " + shown + " has a name of " + std::to_string(part.string().size()) + " bytes, past the system's limit of " +
                         std::to_string(NAME_MAX));
}

void RunFolder::start_new(bool overwrite, const std::vector<std::pair<std::string, fs::path>>& inputs) const {
  check_inputs(overwrite, inputs);
  start_checked(overwrite);
}

void RunFolder::check_inputs(bool overwrite, const std::vector<std::pair<std::string, fs::path>>& inputs) const {
  std::error_code ec;
  // A folder this run reads from (a pretrained run) is never this run's: --overwrite would delete
  // what it is about to read. Compared as real paths (X, X/../X, a symlink to X are one folder).
  const fs::path mine = fs::weakly_canonical(fs::absolute(dir_, ec), ec);
  for (const auto& [what, p] : inputs) {
    std::error_code ec2;
    if (p.empty() || mine.empty()) continue;
    const fs::path theirs = fs::weakly_canonical(fs::absolute(p, ec2), ec2);
    std::error_code ec3;  // the same folder by device and inode too (a bind mount, a hard-linked path)
    if ((!ec2 && theirs == mine) || fs::equivalent(p, dir_, ec3))
      throw config_error("the run folder " + printable(dir_.string()) + " is the folder " + what + " names, which this run reads (" + printable(p.string()) +
                         "): a new run there would " + (overwrite ? "delete it" : "replace it") + "; choose another --run DIR");
    // Nor inside a folder of data (--set data, val_data): the run's own files would be read as text.
    if (!ec2 && what.ends_with("data") && fs::is_directory(theirs, ec3)) {
      const auto [t_end, m_at] = std::mismatch(theirs.begin(), theirs.end(), mine.begin(), mine.end());
      if (t_end == theirs.end())
        throw config_error("the run folder " + printable(dir_.string()) + " lies inside the folder " + what + " names (" + printable(p.string()) +
                           "), which this run reads: its files would be read too; choose a --run DIR outside it");
    }
    // Its files too: one that is a link into this folder (or a hard link of one of its files).
    std::error_code ec4;
    if (!fs::is_directory(p, ec4)) continue;
    for (const auto& e : fs::directory_iterator(p, ec4)) {
      std::error_code ec5;
      const fs::path target = fs::weakly_canonical(fs::absolute(e.path(), ec5), ec5);
      const bool inside = !ec5 && target.parent_path() == mine;
      std::error_code ec6;
      const bool same = is_run_file(e.path().filename().string()) && fs::equivalent(e.path(), dir_ / e.path().filename(), ec6);
      if (inside || same)
        throw config_error("the run folder " + printable(dir_.string()) + " holds " + printable(e.path().filename().string()) + ", which " + what + " (" +
                           printable(p.string()) + ") reads through a link: a new run there would " + (overwrite ? "delete it" : "replace it") +
                           "; choose another --run DIR");
    }
  }
}

void RunFolder::start_checked(bool overwrite) const {
  std::error_code ec;
  if (fs::exists(dir_) && !fs::is_directory(dir_)) throw config_error("the run folder " + dir_.string() + " is a file");
  std::vector<fs::path> held;
  if (fs::is_directory(dir_))
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      if (!is_run_file(e.path().filename().string())) continue;
      std::error_code ec2;
      if (fs::is_directory(fs::symlink_status(e.path(), ec2)))  // found now, not when the run first writes it
        throw config_error("the run folder " + printable(dir_.string()) + " holds a folder " + printable(e.path().filename().string()) +
                           " where the run writes a file of that name: move it away, or choose another --run DIR");
      held.push_back(e.path());
    }
  std::sort(held.begin(), held.end(), [](const fs::path& a, const fs::path& b) {  // name the checkpoint first
    const bool ca = a.filename() == "checkpoint.safetensors", cb = b.filename() == "checkpoint.safetensors";
    return ca != cb ? ca : a < b;
  });

  if (!held.empty() && !overwrite) {
    if (held.front().filename() == "checkpoint.safetensors")
      throw config_error("the run folder " + dir_.string() + " holds a run (checkpoint.safetensors): continue it with --resume, "
                         "choose another with --run DIR, or start over with --overwrite");
    throw config_error("the run folder " + dir_.string() + " holds files of a run without a checkpoint (" + held.front().filename().string() +
                       "): start over with --overwrite, or choose another with --run DIR");
  }
  remove_dead_writers_temporaries();  // also where a run was killed before its first checkpoint
  for (const auto& p : held) fs::remove(p, ec);
  fs::create_directories(dir_, ec);
  if (ec) throw config_error("cannot create the run folder " + dir_.string() + ": " + ec.message());
}

void RunFolder::require_checkpoint() const {
  std::error_code ec;
  const auto st = fs::status(checkpoint(), ec);  // no throw on a symlink loop
  if (ec && ec != std::errc::no_such_file_or_directory) throw config_error("the checkpoint " + checkpoint().string() + ": " + ec.message());
  if (!fs::exists(st)) throw config_error("no checkpoint " + checkpoint().string() + " (train first, or give --run DIR)");
  // A run that is read cleans only a run's folder (its own checkpoint there, whatever --checkpoint reads).
  if (fs::is_regular_file(fs::symlink_status(dir_ / "checkpoint.safetensors", ec))) remove_dead_writers_temporaries();
}

fs::path RunFolder::kept_checkpoint(std::int64_t step) const {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-%08lld.safetensors", (long long)step);
  return dir_ / name;
}

std::vector<std::pair<std::int64_t, fs::path>> RunFolder::kept_checkpoints() const {
  std::vector<std::pair<std::int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string n = e.path().filename().string();
    const std::string prefix = "checkpoint-", suffix = ".safetensors";
    if (n.size() <= prefix.size() + suffix.size() || n.rfind(prefix, 0) != 0 || n.substr(n.size() - suffix.size()) != suffix) continue;
    const std::string digits = n.substr(prefix.size(), n.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 15 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace_back(std::stoll(digits), e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool RunFolder::has_checkpoint() const {
  std::error_code ec;
  return fs::exists(fs::symlink_status(checkpoint(), ec));
}

int RunFolder::remove_dead_writers_temporaries() const {
  // Only the names a run's writers make (".<file>.tmp.<pid>.<n>"): not a user's ".notes.tmp.2024-05-01".
  return checkpoint::remove_stale_temporaries(dir_, [](const std::string& of) { return is_run_file(of) || of == "result.json" || of == "failed.json"; });
}

}  // namespace ctgrad::training
