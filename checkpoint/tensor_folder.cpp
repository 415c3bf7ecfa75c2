#include <ctgrad/checkpoint/tensor_folder.hpp>

#include <set>

#include <nlohmann/json.hpp>

namespace ctgrad::checkpoint {

namespace fs = std::filesystem;

namespace {

// The index is small (a line per tensor): a larger file is not one.
constexpr std::size_t kMaxIndexBytes = std::size_t(64) << 20;

bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\0') == std::string::npos;
}

}  // namespace

TensorFolder::TensorFolder(const fs::path& dir) : dir_(dir) {
  const std::string where = "ctgrad: model folder " + dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw format_error(where + ": not a folder");
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  const bool has_single = fs::exists(fs::symlink_status(single, ec)), has_index = fs::exists(fs::symlink_status(index, ec));
  if (!has_single && !has_index) throw format_error(where + ": holds neither model.safetensors nor model.safetensors.index.json");
  if (!has_index) {
    files_.push_back(std::make_unique<File>(single, OnDemand{}));
    for (const std::string& n : files_.back()->names()) where_[n] = 0;
    return;
  }
  // Sharded: the index names each tensor's shard.
  const std::vector<std::byte> bytes = read_regular_file(index, where + ": " + index.filename().string(), kMaxIndexBytes);
  const std::string at = where + ": " + index.filename().string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data()), reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  } catch (const std::exception& e) {
    throw format_error(at + " is not JSON: " + std::string(e.what()).substr(0, 200));
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
    throw format_error(at + " has no \"weight_map\" object of tensor names and their files");
  std::map<std::string, std::string> shard_of;  // tensor -> file name
  std::set<std::string> shards;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string() || !plain_file_name(file.get<std::string>()))
      throw format_error(at + ": tensor '" + name + "' is mapped to " + file.dump().substr(0, 200) + ", not the name of a file in the folder");
    shard_of[name] = file.get<std::string>();
    shards.insert(file.get<std::string>());
  }
  std::map<std::string, std::size_t> file_index;
  for (const std::string& s : shards) {
    if (!fs::exists(fs::symlink_status(dir / s, ec))) throw format_error(at + " lists the shard " + s + ", which the folder lacks");
    file_index[s] = files_.size();
    files_.push_back(std::make_unique<File>(dir / s, OnDemand{}));
  }
  for (const auto& [name, s] : shard_of) {
    const File& f = *files_[file_index[s]];
    if (!f.has(name)) throw format_error(at + " maps tensor '" + name + "' to " + s + ", which does not hold it");
    where_[name] = file_index[s];
  }
  for (const auto& [s, i] : file_index)
    for (const std::string& n : files_[i]->names())
      if (!shard_of.count(n) || shard_of[n] != s)
        throw format_error(where + ": shard " + s + " holds tensor '" + n + "', which the index " +
                           (shard_of.count(n) ? "maps to " + shard_of[n] : std::string("does not list")));
}

std::vector<fs::path> TensorFolder::files() const {
  std::vector<fs::path> out;
  for (const auto& f : files_) out.push_back(f->path());
  return out;
}

std::vector<std::string> TensorFolder::names() const {
  std::vector<std::string> out;
  for (const auto& [n, i] : where_) out.push_back(n);
  return out;
}

const TensorView& TensorFolder::tensor(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) throw format_error("ctgrad: model folder " + dir_.string() + ": no tensor '" + name + "'");
  return files_[it->second]->tensor(name);
}

void TensorFolder::read_float(const std::string& name, std::span<float> out, std::span<const std::int64_t> shape) const {
  const auto it = where_.find(name);
  if (it == where_.end()) throw format_error("ctgrad: model folder " + dir_.string() + ": no tensor '" + name + "'");
  files_[it->second]->read_float(name, out, shape);
}

}  // namespace ctgrad::checkpoint
