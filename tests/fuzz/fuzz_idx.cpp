// libFuzzer target: any bytes as an (unpacked) IDX file. Refused with a data_error or parsed into
// dims whose product is the data's size.
#include <ctgrad/data/idx.hpp>
#include <ctgrad/data/text.hpp>

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto a = ctgrad::data::parse_idx(std::span<const std::uint8_t>(data, size), "fuzz.idx");
    std::size_t count = 1;
    for (auto d : a.dims) count *= std::size_t(d);
    if (count != a.data.size()) std::abort();
  } catch (const ctgrad::data::data_error&) {
  }
  return 0;
}
