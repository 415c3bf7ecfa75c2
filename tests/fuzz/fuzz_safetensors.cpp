// libFuzzer target: any bytes as a safetensors file, read whole and read on demand (as a model
// folder's shards are). The reader must refuse what is not a valid file with a format_error (never
// crash, hang, read out of bounds or exhaust memory), and what it accepts must be self-consistent.
#include <ctgrad/checkpoint/safetensors.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = std::byte(data[i]);
  try {
    const ctgrad::checkpoint::File f(std::move(bytes), "fuzz.safetensors");
    std::size_t total = 0;
    for (const auto& name : f.names()) {
      const auto& t = f.tensor(name);
      total += t.data.size();
      if (t.data.size() <= (std::size_t(1) << 20)) {  // every storage read as float (F16, BF16 converted), or refused
        std::vector<float> out(t.data.size() / ctgrad::checkpoint::dtype_size(t.dtype));
        try {
          f.read_float(name, out, t.shape);
        } catch (const ctgrad::checkpoint::format_error&) {
        }
      }
    }
    if (total > size) std::abort();  // tensors are views into the file: never more than it holds
  } catch (const ctgrad::checkpoint::format_error&) {
  }
  // On demand: the header from the file, each tensor read from it into place.
  static const std::filesystem::path file = std::filesystem::temp_directory_path() / ("fuzz." + std::to_string(::getpid()) + ".safetensors");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    const ctgrad::checkpoint::File f(file, ctgrad::checkpoint::OnDemand{});
    for (const auto& name : f.names()) {
      const auto& t = f.tensor(name);
      std::int64_t n = 1;
      for (auto d : t.shape) n *= d;
      if (n <= (1 << 18)) {
        std::vector<float> out(static_cast<std::size_t>(n));
        try {
          f.read_float(name, out, t.shape);
        } catch (const ctgrad::checkpoint::format_error&) {
        }
      }
    }
  } catch (const ctgrad::checkpoint::format_error&) {
  }
  return 0;
}
