#include <ctgrad/checkpoint/safetensors.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ctgrad::checkpoint {

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 0;
}
const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "?";
}
namespace {
DType parse_dtype(const std::string& s, const std::string& where) {
  for (DType d : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8})
    if (s == dtype_name(d)) return d;
  throw format_error(where + ": unsupported dtype '" + s + "'");
}
std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}
void write_all(int fd, const void* data, std::size_t n, const std::string& tmp) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("ctgrad: writing " + tmp + ": " + std::strerror(errno));
    }
    p += w, n -= std::size_t(w);
  }
}
}  // namespace

void save(const std::filesystem::path& path, std::span<const TensorView> tensors, const Metadata& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const TensorView& t : tensors) {
    const std::size_t want = std::size_t(numel(t.shape)) * dtype_size(t.dtype);
    if (want != t.data.size())
      throw std::invalid_argument("ctgrad: checkpoint tensor '" + t.name + "': shape needs " + std::to_string(want) +
                                  " bytes, data has " + std::to_string(t.data.size()));
    if (header.contains(t.name)) throw std::invalid_argument("ctgrad: checkpoint tensor '" + t.name + "' appears twice");
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + want}}};
    offset += want;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as the reference writer does
  const std::uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string tmp_name = ".";  // appended piecewise: GCC 12 warns (falsely) on "." + std::string
  tmp_name.append(path.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  const std::string tmp = (dir / tmp_name).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("ctgrad: cannot create " + tmp + ": " + std::strerror(errno));
  try {
    write_all(fd, len, 8, tmp);
    write_all(fd, text.data(), text.size(), tmp);
    for (const TensorView& t : tensors) write_all(fd, t.data.data(), t.data.size(), tmp);
    if (::fsync(fd) != 0) throw std::runtime_error("ctgrad: flushing " + tmp + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    std::filesystem::remove(tmp);
    throw;
  }
  ::close(fd);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // atomic on POSIX within one file system
  if (ec) {
    std::filesystem::remove(tmp);
    throw std::runtime_error("ctgrad: cannot move " + tmp + " to " + path.string() + ": " + ec.message());
  }
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY); dfd >= 0) {  // make the rename durable
    ::fsync(dfd);
    ::close(dfd);
  }
}

File::File(const std::filesystem::path& path) : path_(path) {
  const std::string where = "ctgrad: checkpoint " + path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw format_error(where + ": cannot open");
  in.seekg(0, std::ios::end);
  const auto size = std::size_t(in.tellg());
  in.seekg(0);
  bytes_.resize(size);
  in.read(reinterpret_cast<char*>(bytes_.data()), std::streamsize(size));
  if (size < 8) throw format_error(where + ": truncated (" + std::to_string(size) + " bytes, no header length)");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t(std::to_integer<unsigned char>(bytes_[std::size_t(i)])) << (8 * i);
  if (n > size - 8) throw format_error(where + ": header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) + " bytes): truncated?");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(bytes_.data()) + 8, reinterpret_cast<const char*>(bytes_.data()) + 8 + n);
  } catch (const std::exception& e) {
    throw format_error(where + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw format_error(where + ": header is not a JSON object");
  const std::size_t data_begin = 8 + std::size_t(n), data_size = size - data_begin;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw format_error(where + ": metadata '" + m.key() + "' is not a string");
        metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const std::string at = where + ": tensor '" + it.key() + "'";
    try {
      TensorView t;
      t.name = it.key();
      t.dtype = parse_dtype(it->at("dtype").get<std::string>(), at);
      t.shape = it->at("shape").get<std::vector<std::int64_t>>();
      const auto off = it->at("data_offsets").get<std::vector<std::size_t>>();
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size)
        throw format_error(at + ": data_offsets out of the file's " + std::to_string(data_size) + " data bytes: truncated?");
      for (auto d : t.shape)
        if (d < 0) throw format_error(at + ": negative dim");
      if (off[1] - off[0] != std::size_t(numel(t.shape)) * dtype_size(t.dtype))
        throw format_error(at + ": " + std::to_string(off[1] - off[0]) + " bytes do not fit its dtype and shape");
      t.data = std::span<const std::byte>(bytes_.data() + data_begin + off[0], off[1] - off[0]);
      ranges.push_back({off[0], off[1]});
      index_[t.name] = tensors_.size();
      tensors_.push_back(std::move(t));
    } catch (const nlohmann::json::exception& e) {
      throw format_error(at + ": malformed entry: " + e.what());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw format_error(where + ": two tensors overlap in the data");
}

const TensorView& File::tensor(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw format_error("ctgrad: checkpoint " + path_.string() + ": no tensor '" + name + "'");
  return tensors_[it->second];
}

std::vector<std::string> File::names() const {
  std::vector<std::string> r;
  for (const auto& t : tensors_) r.push_back(t.name);
  return r;
}

template <class T>
void File::read(const std::string& name, std::span<T> out, std::span<const std::int64_t> shape) const {
  const TensorView& t = tensor(name);
  const DType want = view_of<T>("", std::span<const T>(), {}).dtype;
  const std::string at = "ctgrad: checkpoint " + path_.string() + ": tensor '" + name + "'";
  if (t.dtype != want) throw format_error(at + " has dtype " + dtype_name(t.dtype) + ", expected " + dtype_name(want));
  if (!std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end())) {
    auto fmt = [](auto s) {
      std::string r = "[";
      for (std::size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
      return r + "]";
    };
    throw format_error(at + " has shape " + fmt(t.shape) + ", expected " + fmt(std::vector<std::int64_t>(shape.begin(), shape.end())));
  }
  if (out.size_bytes() != t.data.size()) throw format_error(at + ": destination holds " + std::to_string(out.size()) + " values");
  std::memcpy(out.data(), t.data.data(), t.data.size());
}

template void File::read<float>(const std::string&, std::span<float>, std::span<const std::int64_t>) const;
template void File::read<double>(const std::string&, std::span<double>, std::span<const std::int64_t>) const;
template void File::read<std::int32_t>(const std::string&, std::span<std::int32_t>, std::span<const std::int64_t>) const;
template void File::read<std::int64_t>(const std::string&, std::span<std::int64_t>, std::span<const std::int64_t>) const;

}  // namespace ctgrad::checkpoint
