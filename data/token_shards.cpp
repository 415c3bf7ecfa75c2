#include <ctgrad/data/token_shards.hpp>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/data/batches.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

namespace ctgrad::data {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'C', 'T', 'G', 'R', 'A', 'D', 'T', 'K'};

template <class T>
void put(unsigned char* at, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) at[i] = static_cast<unsigned char>(std::uint64_t(v) >> (8 * i));
}
template <class T>
T get(const unsigned char* at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= std::uint64_t(at[i]) << (8 * i);
  return T(v);
}

std::vector<unsigned char> encode_header(const ShardHeader& h) {
  std::vector<unsigned char> b(kShardHeaderBytes, 0);
  std::memcpy(b.data(), kMagic, 8);
  put<std::uint32_t>(&b[8], kShardVersion);
  put<std::uint32_t>(&b[12], h.id_bytes);
  put<std::uint64_t>(&b[16], h.tokens);
  put<std::uint64_t>(&b[24], h.documents);
  put<std::uint64_t>(&b[32], h.next_document);
  put<std::uint32_t>(&b[40], h.vocab_size);
  put<std::int32_t>(&b[44], h.separator);
  put<std::uint64_t>(&b[48], h.vocab_hash);
  return b;
}

// The header of `bytes` (at least the header's size) of a file `size` bytes long.
ShardHeader decode_header(const unsigned char* b, std::uint64_t size, const fs::path& file) {
  const std::string what = "ctgrad: token shard " + file.string();
  if (size < kShardHeaderBytes) throw data_error(what + " is " + std::to_string(size) + " bytes, shorter than its 256-byte header (truncated?)");
  if (std::memcmp(b, kMagic, 8) != 0) throw data_error(what + " is not a token shard (no CTGRADTK magic number)");
  if (const auto v = get<std::uint32_t>(b + 8); v != kShardVersion)
    throw data_error(what + " is of format version " + std::to_string(v) + "; this ctgrad reads version " + std::to_string(kShardVersion));
  ShardHeader h;
  h.id_bytes = get<std::uint32_t>(b + 12);
  h.tokens = get<std::uint64_t>(b + 16);
  h.documents = get<std::uint64_t>(b + 24);
  h.next_document = get<std::uint64_t>(b + 32);
  h.vocab_size = get<std::uint32_t>(b + 40);
  h.separator = get<std::int32_t>(b + 44);
  h.vocab_hash = get<std::uint64_t>(b + 48);
  if (h.id_bytes != 2 && h.id_bytes != 4) throw data_error(what + ": its header gives ids of " + std::to_string(h.id_bytes) + " bytes (2 or 4)");
  if (h.vocab_size == 0 || (h.id_bytes == 2 && h.vocab_size > 65536))
    throw data_error(what + ": its header gives a vocabulary of " + std::to_string(h.vocab_size) + " for " + std::to_string(h.id_bytes) + "-byte ids");
  if (h.separator < -1 || h.separator >= std::int64_t(h.vocab_size)) throw data_error(what + ": its separator id " + std::to_string(h.separator) + " is outside the vocabulary");
  if (h.tokens > (size - kShardHeaderBytes) / h.id_bytes || size != kShardHeaderBytes + h.tokens * h.id_bytes)
    throw data_error(what + " is " + std::to_string(size) + " bytes; its header says " + std::to_string(kShardHeaderBytes) + " + " + std::to_string(h.tokens) + " ids of " +
                     std::to_string(h.id_bytes) + " bytes (truncated or damaged)");
  return h;
}
}  // namespace

std::uint64_t file_xxh3(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw data_error("ctgrad: cannot read " + file.string());
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  std::vector<char> buf(1 << 16);
  while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) {
    XXH3_64bits_update(s, buf.data(), std::size_t(in.gcount()));
    if (!in) break;
  }
  const std::uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return h;
}

std::string shard_name(const std::string& split, std::size_t index) {
  char n[32];
  std::snprintf(n, sizeof n, "_%06zu.bin", index);
  return split + n;
}

ShardWriter::ShardWriter(fs::path dir, std::string split, std::size_t first, ShardHeader format, std::uint64_t shard_tokens)
    : dir_(std::move(dir)), split_(std::move(split)), index_(first), format_(format), shard_tokens_(std::max<std::uint64_t>(shard_tokens, 1)) {}

void ShardWriter::add(std::span<const std::int32_t> ids, std::uint64_t index) {
  const std::size_t w = format_.id_bytes;
  const std::size_t n = ids.size() + (format_.separator >= 0);
  const std::size_t at = pending_.size();
  pending_.resize(at + n * w);
  unsigned char* p = pending_.data() + at;
  auto write = [&](std::int32_t id) {
    if (id < 0 || std::uint32_t(id) >= format_.vocab_size) throw data_error("ctgrad: token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(format_.vocab_size));
    if (w == 2) put<std::uint16_t>(p, std::uint16_t(id));
    else put<std::uint32_t>(p, std::uint32_t(id));
    p += w;
  };
  if (format_.separator >= 0) write(format_.separator);
  for (std::int32_t id : ids) write(id);
  ++documents_;
  if (pending_.size() / w >= shard_tokens_) flush(index + 1);
}

void ShardWriter::finish(std::uint64_t next_document) {
  if (!pending_.empty()) flush(next_document);
}

void ShardWriter::flush(std::uint64_t next_document) {
  ShardHeader h = format_;
  h.tokens = pending_.size() / format_.id_bytes;
  h.documents = documents_;
  h.next_document = next_document;
  const std::vector<unsigned char> head = encode_header(h);
  const std::span<const std::byte> parts[] = {std::as_bytes(std::span(head)), std::as_bytes(std::span(pending_))};
  checkpoint::write_atomically(dir_ / shard_name(split_, index_), parts);
  tokens_ += h.tokens;
  ++index_;
  documents_ = 0;
  pending_.clear();
}

ShardHeader read_shard_header(const fs::path& file) { return ShardFile(file).header(); }

ShardFile::ShardFile(const fs::path& file) : file_(file) {
  fd_ = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw data_error("ctgrad: cannot open token shard " + file.string() + ": " + std::strerror(errno));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) throw data_error("ctgrad: token shard " + file.string() + " is not a regular file");
    unsigned char b[kShardHeaderBytes] = {};
    const ssize_t got = ::pread(fd_, b, sizeof b, 0);
    header_ = decode_header(b, got < ssize_t(sizeof b) ? std::uint64_t(std::max<ssize_t>(got, 0)) : std::uint64_t(st.st_size), file);
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

ShardFile::ShardFile(ShardFile&& o) noexcept : file_(std::move(o.file_)), header_(o.header_), fd_(o.fd_) { o.fd_ = -1; }

ShardFile::~ShardFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ShardFile::read(std::uint64_t start, std::size_t n, std::int32_t* out) const {
  if (start > header_.tokens || n > header_.tokens - start)
    throw data_error("ctgrad: token shard " + file_.string() + ": ids " + std::to_string(start) + "+" + std::to_string(n) + " past its " + std::to_string(header_.tokens));
  // Read into out itself (n ids of w <= 4 bytes fit in its 4n), then widened from the last id down:
  // id i's 4 bytes land where only ids >= i were read, so no step allocates.
  const std::size_t w = header_.id_bytes, bytes = n * w;
  unsigned char* p = reinterpret_cast<unsigned char*>(out);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t r = ::pread(fd_, p + done, bytes - done, off_t(kShardHeaderBytes + start * w + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw data_error("ctgrad: cannot read token shard " + file_.string() + (r < 0 ? ": " + std::string(std::strerror(errno)) : ": it was cut short"));
    done += std::size_t(r);
  }
  for (std::size_t i = n; i-- > 0;) {
    const std::uint32_t id = w == 2 ? get<std::uint16_t>(p + 2 * i) : get<std::uint32_t>(p + 4 * i);
    if (id >= header_.vocab_size)
      throw data_error("ctgrad: token shard " + file_.string() + ": id " + std::to_string(id) + " at position " + std::to_string(start + i) +
                       " is outside its vocabulary of " + std::to_string(header_.vocab_size) + " (damaged)");
    out[i] = std::int32_t(id);
  }
}

void TokenPiece::read_shard(std::uint64_t start, std::size_t n, std::int32_t* out) const { shard->read(start, n, out); }

std::vector<fs::path> shard_files(const fs::path& dir, const std::string& split) {
  std::map<std::size_t, fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(split + "_") || !name.ends_with(".bin")) continue;
    const std::string digits = name.substr(split.size() + 1, name.size() - split.size() - 5);
    if (digits.size() != 6 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    found[std::stoul(digits)] = e.path();
  }
  if (ec) throw data_error("ctgrad: cannot list token shards in " + dir.string() + ": " + ec.message());
  std::vector<fs::path> out;
  for (const auto& [i, p] : found) {
    if (i != out.size()) throw data_error("ctgrad: token shards in " + dir.string() + ": " + shard_name(split, out.size()) + " is missing (" + p.filename().string() + " follows)");
    out.push_back(p);
  }
  return out;
}

std::vector<ShardFile> open_shards(const fs::path& dir, const std::string& split, std::uint64_t vocab_hash) {
  std::vector<ShardFile> out;
  for (const fs::path& f : shard_files(dir, split)) {
    ShardFile s(f);
    if (s.header().vocab_hash != vocab_hash)
      throw data_error("ctgrad: token shard " + f.string() + " was written with another tokenizer (its vocabulary hash differs from the tokenizer's)");
    if (!out.empty() && (s.header().id_bytes != out[0].header().id_bytes || s.header().separator != out[0].header().separator))
      throw data_error("ctgrad: token shard " + f.string() + " differs in its format from " + out[0].file().filename().string());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ctgrad::data
