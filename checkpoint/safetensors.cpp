#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/checkpoint/safetensors.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

namespace ctgrad::checkpoint {

namespace {
// The checksum of a file covers everything that decides what it loads as: the metadata (every key
// but the checksum's, in key order: the config and the steps a resumed run continues from), the
// tensor table (in name order: each name, dtype, shape and data offsets, so two tensors' offsets
// swapped is damage too), then the data section. Strings go in with their length, numbers as
// little-endian u64 (tests/checkpoint/ctgrad_checksum.py implements the same).
void add_u64(Checksum& c, std::uint64_t v) { c.add(std::as_bytes(std::span<const std::uint64_t>(&v, 1))); }
void add_string(Checksum& c, const std::string& s) {
  add_u64(c, s.size());
  c.add(std::as_bytes(std::span<const char>(s.data(), s.size())));
}
struct TableEntry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin, end;
};
// The checksum over the metadata and the table; the data section is added to it after.
Checksum checksum_head(const Metadata& meta, std::vector<TableEntry> table) {
  Checksum c;
  for (const auto& [k, v] : meta) {
    if (k == kChecksumKey) continue;
    add_string(c, k);
    add_string(c, v);
  }
  std::sort(table.begin(), table.end(), [](const TableEntry& a, const TableEntry& b) { return a.name < b.name; });
  for (const TableEntry& t : table) {
    add_string(c, t.name);
    add_string(c, dtype_name(t.dtype));
    add_u64(c, t.shape.size());
    for (std::int64_t d : t.shape) add_u64(c, std::uint64_t(d));
    add_u64(c, t.begin);
    add_u64(c, t.end);
  }
  return c;
}
std::string file_checksum(const Metadata& meta, std::vector<TableEntry> table, std::span<const std::span<const std::byte>> data) {
  Checksum c = checksum_head(meta, std::move(table));
  for (const auto& d : data) c.add(d);
  return c.hex();
}
}  // namespace

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
    case DType::U8: return 1;
    case DType::F16: case DType::BF16: return 2;
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
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
  }
  return "?";
}
namespace {
DType parse_dtype(const std::string& s, const std::string& where) {
  for (DType d : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::F16, DType::BF16})
    if (s == dtype_name(d)) return d;
  throw format_error(where + ": unsupported dtype '" + s + "'");
}
std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}
// JSON nesting depth, counted before parsing (a recursive parser would overflow the stack first).
int nesting_of(const char* p, std::size_t n) {
  int depth = 0, most = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = p[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') in_string = true;
    else if (c == '[' || c == '{') most = std::max(most, ++depth);
    else if (c == ']' || c == '}') --depth;
  }
  return most;
}
}  // namespace

int json_nesting(std::string_view text) { return nesting_of(text.data(), text.size()); }

std::vector<std::byte> read_regular_file(const std::filesystem::path& path, const std::string& what, std::size_t limit) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses anything but a file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw format_error(what + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw format_error(what + ": not a regular file");
  }
  if (std::uint64_t(st.st_size) > limit) {
    ::close(fd);
    throw format_error(what + ": " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(limit) + " this reader accepts");
  }
  std::vector<std::byte> bytes(std::size_t(st.st_size));
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int err = r < 0 ? errno : 0;
      ::close(fd);
      throw format_error(what + ": cannot read its " + std::to_string(bytes.size()) + " bytes" + (err ? std::string(": ") + std::strerror(err) : " (it shrank)"));
    }
    got += std::size_t(r);
  }
  ::close(fd);
  return bytes;
}

void save(const std::filesystem::path& path, std::span<const TensorView> tensors, const Metadata& metadata) {
  nlohmann::ordered_json header;
  Metadata meta = metadata;
  std::vector<TableEntry> table;
  std::vector<std::span<const std::byte>> data;
  std::set<std::string> names;
  std::size_t offset = 0;
  for (const TensorView& t : tensors) {
    const std::int64_t count = numel(t.shape);
    if (count < 0) throw std::invalid_argument("ctgrad: checkpoint tensor '" + t.name + "': bad shape");
    const std::size_t want = std::size_t(count) * dtype_size(t.dtype);
    if (want != t.data.size())
      throw std::invalid_argument("ctgrad: checkpoint tensor '" + t.name + "': shape needs " + std::to_string(want) +
                                  " bytes, data has " + std::to_string(t.data.size()));
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      throw std::invalid_argument("ctgrad: checkpoint tensor '" + t.name + "' appears twice, or is named __metadata__");
    table.push_back({t.name, t.dtype, t.shape, offset, offset + want});
    data.push_back(t.data);
    offset += want;
  }
  meta[kChecksumKey] = file_checksum(meta, table, data);
  header["__metadata__"] = meta;
  for (const TableEntry& t : table)
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as the reference writer does
  const std::uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  std::vector<std::span<const std::byte>> parts{std::as_bytes(std::span<const unsigned char>(len, 8)),
                                               std::as_bytes(std::span<const char>(text.data(), text.size()))};
  for (const TensorView& t : tensors) parts.push_back(t.data);
  write_atomically(path, parts);
}

File::File(const std::filesystem::path& path) : path_(path) {
  const std::string where = "ctgrad: checkpoint " + path.string();
  bytes_ = read_regular_file(path, where);
  parse(bytes_, bytes_.size());
}

File::File(std::vector<std::byte> bytes, const std::filesystem::path& path) : path_(path), bytes_(std::move(bytes)) { parse(bytes_, bytes_.size()); }

namespace {
// Reads exactly out.size() bytes at `at`; false when the file ends first.
bool pread_all(int fd, std::uint64_t at, std::span<std::byte> out) {
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::pread(fd, out.data() + got, out.size() - got, off_t(at + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += std::size_t(r);
  }
  return true;
}
constexpr std::uint64_t kMaxHeaderBytes = std::uint64_t(100) << 20;  // as Hugging Face's own reader
}  // namespace

File::File(const std::filesystem::path& path, OnDemand) : path_(path) {
  const std::string where = "ctgrad: checkpoint " + path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw format_error(where + ": cannot open: " + std::strerror(errno));
  fd_ = std::shared_ptr<const int>(new int(fd), [](const int* f) { ::close(*f), delete f; });
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw format_error(where + ": not a regular file");
  const std::size_t size = std::size_t(st.st_size);
  std::vector<std::byte> head(std::min<std::size_t>(size, 8));
  if (!pread_all(fd, 0, head)) throw format_error(where + ": cannot read its header length");
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < head.size(); ++i) n |= std::uint64_t(std::to_integer<unsigned char>(head[i])) << (8 * i);
  if (size >= 8 && n <= size - 8 && n <= kMaxHeaderBytes) {
    head.resize(8 + std::size_t(n));
    if (!pread_all(fd, 8, std::span<std::byte>(head).subspan(8))) throw format_error(where + ": cannot read its header (it shrank)");
  }
  parse(head, size);
}

void File::parse(std::span<const std::byte> head, std::size_t size) {
  const std::string where = "ctgrad: checkpoint " + path_.string();
  const bool on_demand = fd_ != nullptr;
  if (size < 8) throw format_error(where + ": truncated (" + std::to_string(size) + " bytes, no header length)");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t(std::to_integer<unsigned char>(head[std::size_t(i)])) << (8 * i);
  if (n > size - 8) throw format_error(where + ": header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) + " bytes): truncated?");
  if (on_demand && n > kMaxHeaderBytes) throw format_error(where + ": header length " + std::to_string(n) + " is over 100 MB: not a safetensors header");
  // ctgrad pads its headers to 8 bytes; other writers (safetensors before 0.3, MLX) need not.
  if (n % 8 != 0 && !on_demand)
    throw format_error(where + ": header length " + std::to_string(n) + " is not a multiple of 8 (the format pads it): the length or the header is damaged");
  const char* text = reinterpret_cast<const char*>(head.data()) + 8;
  if (nesting_of(text, std::size_t(n)) > 64) throw format_error(where + ": header nests deeper than 64 levels");
  if (std::memchr(text, 0, std::size_t(n)) != nullptr) throw format_error(where + ": header holds a NUL byte (a JSON parser would stop there)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + n);
  } catch (const std::exception& e) {
    throw format_error(where + ": header is not valid JSON: " + std::string(e.what()).substr(0, 200));
  }
  if (!header.is_object()) throw format_error(where + ": header is not a JSON object");
  const std::size_t data_begin = 8 + std::size_t(n), data_size = size - data_begin;
  struct Range {
    std::size_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw format_error(where + ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw format_error(where + ": metadata '" + m.key() + "' is not a string");
        metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const std::string at = where + ": tensor '" + it.key() + "'";
    try {
      if (!it->is_object()) throw format_error(at + ": not an object");
      TensorView t;
      t.name = it.key();
      t.dtype = parse_dtype(it->at("dtype").get<std::string>(), at);
      // Integers only: converting a JSON float (1e300) to an integer is undefined behaviour.
      auto integers = [&](const char* key) -> const nlohmann::json& {
        const nlohmann::json& v = it->at(key);
        if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const nlohmann::json& e) { return e.is_number_integer(); }))
          throw format_error(at + ": " + key + " is not a list of integers");
        return v;
      };
      t.shape = integers("shape").get<std::vector<std::int64_t>>();
      const auto off = integers("data_offsets").get<std::vector<std::uint64_t>>();
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size)
        throw format_error(at + ": data_offsets out of the file's " + std::to_string(data_size) + " data bytes: truncated?");
      const std::int64_t count = numel(t.shape);
      if (count < 0) throw format_error(at + ": a negative dim, or dims whose product overflows");
      if (off[1] - off[0] != std::uint64_t(count) * dtype_size(t.dtype))
        throw format_error(at + ": " + std::to_string(off[1] - off[0]) + " bytes do not fit its dtype and shape");
      if (on_demand) offset_.push_back(data_begin + off[0]);
      else t.data = std::span<const std::byte>(bytes_.data() + data_begin + off[0], std::size_t(off[1] - off[0]));
      ranges.push_back({std::size_t(off[0]), std::size_t(off[1]), t.name});
      index_[t.name] = tensors_.size();
      tensors_.push_back(std::move(t));
    } catch (const nlohmann::json::exception& e) {
      throw format_error(at + ": malformed entry: " + std::string(e.what()).substr(0, 200));
    }
  }
  // The tensors tile the data section: no gap, no overlap, nothing after the last.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::size_t at = 0;
  for (const Range& r : ranges) {
    if (r.begin < at) throw format_error(where + ": tensor '" + r.name + "' overlaps another in the data");
    if (r.begin > at) throw format_error(where + ": " + std::to_string(r.begin - at) + " data bytes before tensor '" + r.name + "' belong to no tensor");
    at = r.end;
  }
  if (at != data_size)
    throw format_error(where + ": " + std::to_string(data_size - at) + " bytes after the last tensor belong to no tensor (the header length is wrong, or the file was appended to)");
  const auto sum = metadata_.find(kChecksumKey);
  if (sum != metadata_.end() && on_demand) {  // the data streamed through the checksum, a chunk at a time
    std::vector<TableEntry> table;
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const std::uint64_t begin = offset_[i] - data_begin, bytes = std::uint64_t(numel(tensors_[i].shape)) * dtype_size(tensors_[i].dtype);
      table.push_back({tensors_[i].name, tensors_[i].dtype, tensors_[i].shape, begin, begin + bytes});
    }
    Checksum c = checksum_head(metadata_, std::move(table));
    std::vector<std::byte> chunk(std::size_t(1) << 20);
    for (std::uint64_t at = data_begin; at < size;) {
      const std::size_t n = std::size_t(std::min<std::uint64_t>(chunk.size(), size - at));
      if (!pread_all(*fd_, at, std::span<std::byte>(chunk).first(n))) throw format_error(where + ": cannot read its data (it shrank)");
      c.add(std::span<const std::byte>(chunk).first(n));
      at += n;
    }
    if (c.hex() != sum->second) throw format_error(where + ": its data, tensor table or metadata does not match its checksum: the file is damaged");
    checksummed_ = true;
    return;
  }
  if (sum != metadata_.end()) {
    std::vector<TableEntry> table;
    for (const TensorView& t : tensors_) {
      const auto begin = std::uint64_t(t.data.data() - (bytes_.data() + data_begin));
      table.push_back({t.name, t.dtype, t.shape, begin, begin + t.data.size()});
    }
    const std::span<const std::byte> data = std::span<const std::byte>(bytes_).subspan(data_begin);
    if (file_checksum(metadata_, std::move(table), std::span<const std::span<const std::byte>>(&data, 1)) != sum->second) throw format_error(where + ": its data, tensor table or metadata does not match its checksum: the file is damaged");
    checksummed_ = true;
  }
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

namespace {
std::string shape_text(std::span<const std::int64_t> s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// IEEE 754 binary16 to binary32, exactly (every half is a float): subnormals, infinities, NaN.
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN (payload kept)
  else if (exponent != 0) bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  else if (mantissa == 0) bits = sign;  // +-0
  else {  // subnormal: normalise
    int e = -1;
    std::uint32_t m = mantissa;
    do ++e, m <<= 1; while ((m & 0x400u) == 0);
    bits = sign | (std::uint32_t(112 - e) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
}  // namespace

template <class T>
void File::read(const std::string& name, std::span<T> out, std::span<const std::int64_t> shape) const {
  const TensorView& t = tensor(name);
  const DType want = view_of<T>("", std::span<const T>(), {}).dtype;
  const std::string at = "ctgrad: checkpoint " + path_.string() + ": tensor '" + name + "'";
  if (t.dtype != want) throw format_error(at + " has dtype " + dtype_name(t.dtype) + ", expected " + dtype_name(want));
  if (!std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end()))
    throw format_error(at + " has shape " + shape_text(t.shape) + ", expected " + shape_text(shape));
  if (out.size() != std::size_t(numel(t.shape))) throw format_error(at + ": destination holds " + std::to_string(out.size()) + " values");
  read_bytes(t, 0, std::as_writable_bytes(out));
}

void File::read_bytes(const TensorView& t, std::size_t begin, std::span<std::byte> out) const {
  if (!fd_) {
    std::memcpy(out.data(), t.data.data() + begin, out.size());
    return;
  }
  const std::size_t i = index_.at(t.name);
  if (!pread_all(*fd_, offset_[i] + begin, out))
    throw format_error("ctgrad: checkpoint " + path_.string() + ": tensor '" + t.name + "': the file ended before its data (it was truncated after it was opened)");
}

void File::read_float(const std::string& name, std::span<float> out, std::span<const std::int64_t> shape) const {
  const TensorView& t = tensor(name);
  const std::string at = "ctgrad: checkpoint " + path_.string() + ": tensor '" + name + "'";
  if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16 && t.dtype != DType::F64)
    throw format_error(at + " has dtype " + dtype_name(t.dtype) + ", not a floating-point one (F32, F16, BF16, F64)");
  if (!std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end()))
    throw format_error(at + " has shape " + shape_text(t.shape) + ", expected " + shape_text(shape));
  const std::size_t n = std::size_t(numel(t.shape)), width = dtype_size(t.dtype);
  if (out.size() != n) throw format_error(at + ": destination holds " + std::to_string(out.size()) + " values, the tensor " + std::to_string(n));
  if (t.dtype == DType::F32) {
    read_bytes(t, 0, std::as_writable_bytes(out));
    return;
  }
  // Converted in chunks (the file's bytes, read on demand, pass through a small buffer).
  constexpr std::size_t kChunk = std::size_t(1) << 16;
  std::vector<std::byte> buffer(std::min(n, kChunk) * width);
  for (std::size_t first = 0; first < n; first += kChunk) {
    const std::size_t count = std::min(kChunk, n - first);
    const std::byte* in;  // (little-endian, as this host: ctgrad runs on x86-64)
    if (fd_) read_bytes(t, first * width, std::span<std::byte>(buffer).first(count * width)), in = buffer.data();
    else in = t.data.data() + first * width;
    float* o = out.data() + first;
    switch (t.dtype) {
      case DType::F64:
        for (std::size_t i = 0; i < count; ++i) {
          double d;
          std::memcpy(&d, in + 8 * i, 8);
          o[i] = float(d);
        }
        break;
      case DType::F16:
        for (std::size_t i = 0; i < count; ++i) {
          std::uint16_t h;
          std::memcpy(&h, in + 2 * i, 2);
          o[i] = half_to_float(h);
        }
        break;
      default:  // BF16: a float's upper half
        for (std::size_t i = 0; i < count; ++i) {
          std::uint16_t h;
          std::memcpy(&h, in + 2 * i, 2);
          const std::uint32_t bits = std::uint32_t(h) << 16;
          std::memcpy(&o[i], &bits, 4);
        }
    }
  }
}

template void File::read<float>(const std::string&, std::span<float>, std::span<const std::int64_t>) const;
template void File::read<double>(const std::string&, std::span<double>, std::span<const std::int64_t>) const;
template void File::read<std::int32_t>(const std::string&, std::span<std::int32_t>, std::span<const std::int64_t>) const;
template void File::read<std::int64_t>(const std::string&, std::span<std::int64_t>, std::span<const std::int64_t>) const;

}  // namespace ctgrad::checkpoint
