// The tensors of a Hugging Face model folder: `model.safetensors`, or `model.safetensors.index.json`
// and the shards its "weight_map" lists ({"weight_map": {"tensor name": "model-00001-of-00002.safetensors"}}).
//
// Each shard's header is read and validated as checkpoint::File reads a file; tensors are read on
// demand (File's OnDemand: a 125M-parameter folder costs its parameters once, not twice). The index is checked too: a
// JSON object whose weight_map maps names to file names inside the folder (no path, no "..");
// every tensor it names is in the shard it names, and every tensor of a shard is in the index
// (what the index does not list would be loaded from nowhere or silently dropped). A failure is
// a format_error naming the folder, the file and the tensor.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <ctgrad/checkpoint/safetensors.hpp>

namespace ctgrad::checkpoint {

class TensorFolder {
 public:
  explicit TensorFolder(const std::filesystem::path& dir);
  const std::filesystem::path& dir() const { return dir_; }
  // The files read: model.safetensors, or the index's shards in name order.
  std::vector<std::filesystem::path> files() const;
  std::vector<std::string> names() const;  // every tensor, in name order
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  const TensorView& tensor(const std::string& name) const;
  // As File::read_float (F32, F16, BF16, F64 as float; the shape checked), from the tensor's shard.
  void read_float(const std::string& name, std::span<float> out, std::span<const std::int64_t> shape) const;

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<File>> files_;
  std::map<std::string, std::size_t> where_;  // tensor name -> its file
};

}  // namespace ctgrad::checkpoint
