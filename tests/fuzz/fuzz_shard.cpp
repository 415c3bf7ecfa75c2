// libFuzzer target: any bytes as a token shard. Refused with a data_error, or opened with a header
// that accounts for every byte, ids within their width, and a read past the end refused.
#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/token_shards.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    char t[] = "/tmp/ctgrad-fuzz-shard-XXXXXX";
    return std::string(::mkdtemp(t));
  }();
  const std::string file = dir + "/train_000000.bin";
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  try {
    const ctgrad::data::ShardFile s(file);
    const auto& h = s.header();
    if (ctgrad::data::kShardHeaderBytes + h.tokens * h.id_bytes != size) std::abort();
    if (ctgrad::data::read_shard_header(file).tokens != h.tokens) std::abort();
    const ctgrad::data::TokenPiece p{.shard = &s, .size = h.tokens};
    std::vector<std::int32_t> ids(std::size_t(h.tokens));
    p.read(0, ids.size(), ids.data());
    for (std::int32_t id : ids)
      if (id < 0 || (h.id_bytes == 2 && id > 65535)) std::abort();
    if (h.tokens > 0) {
      try {
        p.read(h.tokens - 1, 2, ids.data());  // past the end: refused
        std::abort();
      } catch (const ctgrad::data::data_error&) {
      }
    }
  } catch (const ctgrad::data::data_error&) {
  }
  std::remove(file.c_str());
  return 0;
}
