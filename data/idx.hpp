// IDX files (the MNIST family's format: big-endian magic 0x0000080D, dims, bytes), gzipped, read
// with zlib; and Fashion-MNIST from the Debian package dataset-fashion-mnist.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ctgrad::data {

struct IdxArray {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;  // unsigned bytes (type code 0x08)
};
// Throws data_error naming the file for a missing, truncated or malformed file.
IdxArray read_idx_gz(const std::filesystem::path& path);
// The IDX bytes (after gunzip) of a file named `where` in errors.
IdxArray parse_idx(std::span<const std::uint8_t> raw, const std::string& where);

struct ImageSet {
  std::int64_t count = 0, rows = 0, cols = 0, channels = 1;
  std::vector<std::uint8_t> pixels;  // count * channels * rows * cols (planar)
  std::vector<std::int32_t> labels;  // count
};
// split: "train" (60,000) or "test" (10,000).
ImageSet fashion_mnist(const std::string& split, const std::filesystem::path& dir = "/usr/share/datasets/fashion-mnist");

}  // namespace ctgrad::data
