#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/data/cache.hpp>

#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace ctgrad::data {

namespace {
constexpr std::string_view kMagic = "ctgrad-cache 1\n";  // then the payload's XXH3-128 (16 bytes), then the payload

std::string hash_bytes(std::string_view bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  std::string out(16, '\0');
  std::memcpy(out.data(), &h.low64, 8);
  std::memcpy(out.data() + 8, &h.high64, 8);
  return out;
}
}  // namespace

CacheKey::CacheKey(std::string_view kind) { add(kind); }

CacheKey& CacheKey::add(std::string_view bytes) {
  add(std::int64_t(bytes.size()));
  if (bytes.size() > 4096) {  // a text: hashed where it is, not copied
    flush();
    const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
    pending_.append(reinterpret_cast<const char*>(&h.low64), 8).append(reinterpret_cast<const char*>(&h.high64), 8);
  } else {
    pending_.append(bytes);
  }
  return *this;
}

CacheKey& CacheKey::add(std::int64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  pending_.append(b, 8);
  return *this;
}

void CacheKey::flush() {
  if (pending_.empty()) return;
  // Chained: the previous hash, then the pending fields.
  std::string block(16, '\0');
  std::memcpy(block.data(), &lo_, 8);
  std::memcpy(block.data() + 8, &hi_, 8);
  block += pending_;
  const XXH128_hash_t h = XXH3_128bits(block.data(), block.size());
  lo_ = h.low64, hi_ = h.high64;
  pending_.clear();
}

std::string CacheKey::hex() const {
  CacheKey k = *this;
  k.flush();
  char s[33];
  std::snprintf(s, sizeof s, "%016llx%016llx", static_cast<unsigned long long>(k.hi_), static_cast<unsigned long long>(k.lo_));
  return s;
}

DataCache DataCache::from_environment() {
  if (const char* c = std::getenv("CTGRAD_CACHE")) {
    const std::string v = c;
    return v.empty() || v == "off" ? DataCache() : DataCache(v);
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return DataCache(std::filesystem::path(x) / "ctgrad");
  if (const char* h = std::getenv("HOME"); h && *h) return DataCache(std::filesystem::path(h) / ".cache" / "ctgrad");
  return DataCache();
}

std::filesystem::path DataCache::file(const CacheKey& key, std::string_view kind) const {
  return dir_ / (std::string(kind) + "-" + key.hex());
}

std::optional<std::string> DataCache::read(const CacheKey& key, std::string_view kind) const {
  if (!enabled()) return std::nullopt;
  const std::filesystem::path f = file(key, kind);
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(f, ec);
  if (!std::filesystem::exists(st)) return std::nullopt;
  if (!std::filesystem::is_regular_file(st)) {  // a FIFO or a device would block or flood the read
    std::fprintf(stderr, "ctgrad: warning: the cache entry %s is not a regular file: removed, and its data made again\n", f.c_str());
    std::filesystem::remove(f, ec);
    return std::nullopt;
  }
  std::ifstream in(f, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  const std::string all = std::move(s).str();
  const std::size_t head = kMagic.size() + 16;
  if (all.size() >= head && std::string_view(all).substr(0, kMagic.size()) == kMagic) {
    std::string payload = all.substr(head);
    if (hash_bytes(payload) == std::string_view(all).substr(kMagic.size(), 16)) return payload;
  }
  std::fprintf(stderr, "ctgrad: warning: the cache entry %s is damaged: removed, and its data made again\n", f.c_str());
  std::filesystem::remove(f, ec);
  return std::nullopt;
}

void DataCache::write(const CacheKey& key, std::string_view kind, std::string_view bytes) const {
  if (!enabled()) return;
  const std::filesystem::path f = file(key, kind);
  try {
    std::filesystem::create_directories(dir_);
    const std::string h = hash_bytes(bytes);
    const std::span<const std::byte> parts[] = {std::as_bytes(std::span(kMagic.data(), kMagic.size())),
                                                std::as_bytes(std::span(h.data(), h.size())),
                                                std::as_bytes(std::span(bytes.data(), bytes.size()))};
    checkpoint::write_atomically(f, parts);
  } catch (const std::exception& e) {
    static std::atomic<bool> warned{false};  // once: a cache that cannot be written fails every entry alike
    if (!warned.exchange(true))
      std::fprintf(stderr, "ctgrad: warning: could not keep %s in the cache (%s): going on without it (and without the cache's other entries)\n",
                   f.c_str(), e.what());
  }
}

}  // namespace ctgrad::data
