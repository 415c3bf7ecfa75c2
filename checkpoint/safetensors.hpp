// The safetensors format: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}},
// then the raw little-endian tensor bytes. Files are written atomically (checkpoint/atomic_file.hpp):
// a crash mid-write leaves the previous file intact. The writer pads the header to a multiple of 8
// bytes and records a checksum of the metadata and the data in the metadata ("ctgrad_checksum").
//
// Reading trusts nothing: the header must be a JSON object of at most 64 levels, its length a
// multiple of 8 that stays inside the file, every entry well-formed with dims whose product does
// not overflow, the tensors must cover the data section exactly (no gap, no overlap, no trailing
// bytes), and metadata and data must match the recorded checksum (files of other writers have none:
// checksummed() says whether it was checked; training checkpoints require it). Any failure is a format_error naming the
// file, the tensor and what is wrong: a truncated, padded-short or bit-flipped file never loads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ctgrad::checkpoint {

struct format_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// F16 and BF16: the storage of most pretrained checkpoints (read, converted, by read_float).
enum class DType { F32, F64, I32, I64, U8, F16, BF16 };
std::size_t dtype_size(DType d);
const char* dtype_name(DType d);

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;
};

template <class T>
TensorView view_of(std::string name, std::span<const T> data, std::vector<std::int64_t> shape) {
  DType d = std::is_same_v<T, float> ? DType::F32 : std::is_same_v<T, double> ? DType::F64
          : std::is_same_v<T, std::int32_t> ? DType::I32 : std::is_same_v<T, std::int64_t> ? DType::I64 : DType::U8;
  return {std::move(name), d, std::move(shape), std::as_bytes(data)};
}

using Metadata = std::map<std::string, std::string>;

// The metadata key of the checksum of the metadata and data (written by save, checked when present).
inline constexpr const char* kChecksumKey = "ctgrad_checksum";

void save(const std::filesystem::path& path, std::span<const TensorView> tensors, const Metadata& metadata = {});

// Reading on demand: the header is read and validated at open, each tensor's bytes when it is
// read (pread, straight into the destination: the file is never held whole). A file that shrinks
// meanwhile is a format_error, never a fault. A file carrying ctgrad's checksum is checked at
// open by streaming its data through it (a pass over the file, in 1 MB chunks, nothing kept).
// TensorView::data is empty for a tensor not yet in memory.
struct OnDemand {};

class File {
 public:
  explicit File(const std::filesystem::path& path);  // reads and validates
  File(const std::filesystem::path& path, OnDemand);
  // The bytes of a file (named `path` in errors), validated the same way.
  File(std::vector<std::byte> bytes, const std::filesystem::path& path);
  const Metadata& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const TensorView& tensor(const std::string& name) const;
  std::vector<std::string> names() const;
  // Copies a tensor out, checking dtype and shape; errors name the file and the tensor.
  template <class T>
  void read(const std::string& name, std::span<T> out, std::span<const std::int64_t> shape) const;
  // Copies a floating-point tensor out as float, whatever its storage (F32, F16, BF16, F64:
  // rounded to nearest); checks the shape as read does, refuses an integer tensor naming its dtype.
  void read_float(const std::string& name, std::span<float> out, std::span<const std::int64_t> shape) const;
  const std::filesystem::path& path() const { return path_; }
  // Whether the file carried a checksum (it matched, or the constructor threw).
  bool checksummed() const { return checksummed_; }

 private:
  void parse(std::span<const std::byte> head, std::size_t size);
  void read_bytes(const TensorView& t, std::size_t begin, std::span<std::byte> out) const;  // [begin, begin + out.size()) of t
  std::filesystem::path path_;
  std::vector<std::byte> bytes_;
  std::shared_ptr<const int> fd_;      // on demand: the open file
  std::vector<std::uint64_t> offset_;  // on demand: each tensor's first byte in the file
  std::vector<TensorView> tensors_;
  std::map<std::string, std::size_t> index_;
  Metadata metadata_;
  bool checksummed_ = false;
};

// How deep a JSON text nests (brackets and braces outside strings): checked before parsing an
// untrusted file, whose deep nesting would otherwise recurse through the stack when copied or shown.
int json_nesting(std::string_view text);

// The bytes of a regular file of at most `limit` bytes; a FIFO, device or folder, or a larger file,
// is a format_error starting with `what` (never a read that blocks or exhausts memory).
std::vector<std::byte> read_regular_file(const std::filesystem::path& path, const std::string& what,
                                         std::size_t limit = std::size_t(1) << 40);

}  // namespace ctgrad::checkpoint
