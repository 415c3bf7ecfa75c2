#include <ctgrad/data/idx.hpp>
#include <ctgrad/data/text.hpp>

#include <zlib.h>

namespace ctgrad::data {

IdxArray read_idx_gz(const std::filesystem::path& path) {
  const std::string where = "ctgrad: " + path.string();
  if (!std::filesystem::exists(path)) throw data_error(where + ": no such file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw data_error(where + ": cannot open");
  std::vector<std::uint8_t> raw;
  unsigned char buf[1 << 16];
  int n;
  constexpr std::size_t kLimit = std::size_t(1) << 31;  // 2 GB: a gzip bomb is an error, not an exhausted machine
  while ((n = gzread(f, buf, sizeof buf)) > 0 && raw.size() <= kLimit) raw.insert(raw.end(), buf, buf + n);
  if (raw.size() > kLimit) {
    gzclose(f);
    throw data_error(where + ": unpacks to more than 2 GB: not an IDX data set");
  }
  int err = 0;
  const char* msg = gzerror(f, &err);
  const bool bad = n < 0 || (err != Z_OK && err != Z_STREAM_END);
  const std::string why = bad ? std::string(msg ? msg : "read error") : "";
  gzclose(f);
  if (bad) throw data_error(where + ": corrupt gzip data: " + why);
  return parse_idx(raw, where);
}

IdxArray parse_idx(std::span<const std::uint8_t> raw, const std::string& where) {
  if (raw.size() < 4) throw data_error(where + ": truncated: " + std::to_string(raw.size()) + " bytes, no IDX header");
  if (raw[0] != 0 || raw[1] != 0 || raw[2] != 0x08)
    throw data_error(where + ": not an unsigned-byte IDX file (magic " + std::to_string(raw[0]) + " " + std::to_string(raw[1]) + " " +
                     std::to_string(raw[2]) + " " + std::to_string(raw[3]) + ")");
  const int rank = raw[3];
  if (rank < 1 || raw.size() < std::size_t(4 + 4 * rank)) throw data_error(where + ": truncated IDX header");
  IdxArray a;
  std::size_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const std::size_t o = std::size_t(4 + 4 * d);
    const std::int64_t v = (std::int64_t(raw[o]) << 24) | (std::int64_t(raw[o + 1]) << 16) | (std::int64_t(raw[o + 2]) << 8) | raw[o + 3];
    a.dims.push_back(v);
    if (__builtin_mul_overflow(count, std::size_t(v), &count))
      throw data_error(where + ": its dims' product overflows: not an IDX data set");
  }
  const std::size_t header = std::size_t(4 + 4 * rank);
  if (raw.size() - header != count)
    throw data_error(where + ": holds " + std::to_string(raw.size() - header) + " data bytes, its header promises " +
                     std::to_string(count) + (raw.size() - header < count ? " (truncated)" : ""));
  a.data.assign(raw.begin() + std::ptrdiff_t(header), raw.end());
  return a;
}

ImageSet fashion_mnist(const std::string& split, const std::filesystem::path& dir) {
  if (split != "train" && split != "test") throw data_error("ctgrad: Fashion-MNIST split must be train or test, not '" + split + "'");
  const std::string stem = split == "train" ? "train" : "t10k";
  if (!std::filesystem::exists(dir))
    throw data_error("ctgrad: Fashion-MNIST needs the Debian package dataset-fashion-mnist (" + dir.string() +
                     " is missing): run scripts/setup.sh --tests or apt-get install dataset-fashion-mnist");
  IdxArray images = read_idx_gz(dir / (stem + "-images-idx3-ubyte.gz"));
  IdxArray labels = read_idx_gz(dir / (stem + "-labels-idx1-ubyte.gz"));
  if (images.dims.size() != 3 || labels.dims.size() != 1 || images.dims[0] != labels.dims[0])
    throw data_error("ctgrad: Fashion-MNIST " + split + ": images and labels do not match in count");
  ImageSet s;
  s.count = images.dims[0], s.rows = images.dims[1], s.cols = images.dims[2];
  s.pixels = std::move(images.data);
  for (std::uint8_t l : labels.data) {
    if (l > 9) throw data_error("ctgrad: Fashion-MNIST " + split + ": label " + std::to_string(l) + " is not a class 0-9");
    s.labels.push_back(l);
  }
  return s;
}

}  // namespace ctgrad::data
