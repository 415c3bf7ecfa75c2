// A cache of prepared data shared by the runs on one machine: trained tokenizers, encoded corpora,
// text read through another program (R), which every run of a recipe on the same inputs would
// otherwise compute again (seconds a run; an ablation study runs dozens). An entry is named by a 128-bit hash (xxHash's XXH3) of
// everything that made it, so a changed text, option or library version is a miss, never a stale
// hit. Entries are written to a temporary file and renamed (a reader never sees half of one) and
// carry a hash of their bytes: a damaged entry is recomputed and replaced, never used.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ctgrad::data {

// The name of an entry: a streaming hash of typed fields, each with its length, so that the
// fields ("ab", "c") and ("a", "bc") name different entries.
class CacheKey {
 public:
  explicit CacheKey(std::string_view kind);  // what the entry holds, with its format's version
  CacheKey& add(std::string_view bytes);
  CacheKey& add(std::int64_t v);
  std::string hex() const;  // 32 hex digits

 private:
  std::uint64_t lo_ = 0, hi_ = 0;
  std::string pending_;  // fields not yet hashed (hashed in bulk: most are a few bytes)
  void flush();
};

class DataCache {
 public:
  // No folder: a cache that misses every lookup and keeps nothing.
  DataCache() = default;
  explicit DataCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  // CTGRAD_CACHE when set (off, or empty: no cache), else $XDG_CACHE_HOME/ctgrad, else
  // $HOME/.cache/ctgrad.
  static DataCache from_environment();

  bool enabled() const { return !dir_.empty(); }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path file(const CacheKey& key, std::string_view kind) const;  // <dir>/<kind>-<hex>

  // The entry's bytes, or nothing on a miss. A damaged entry is removed and is a miss.
  std::optional<std::string> read(const CacheKey& key, std::string_view kind) const;
  // Stores an entry. A failure (a full disk, a read-only folder) is a warning on stderr, not an
  // error: the run goes on without the cache.
  void write(const CacheKey& key, std::string_view kind, std::string_view bytes) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace ctgrad::data
