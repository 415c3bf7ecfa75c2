// libFuzzer target: any bytes as a safetensors file. The reader must refuse what is not a valid
// file with a format_error (never crash, hang, read out of bounds or exhaust memory), and what it
// accepts must be self-consistent.
#include <ctgrad/checkpoint/safetensors.hpp>

#include <cstdint>
#include <cstdlib>
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
  return 0;
}
