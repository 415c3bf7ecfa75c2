// A Hugging Face model folder's config.json, read key by key: every key a family reads is taken,
// and finish() refuses, by name, any key nobody took (a field ctgrad would otherwise ignore and
// compute something else than the model was trained as). A null value counts as absent where the
// family's Hugging Face default is None (null_or_absent tells the two apart where it is not).
// Errors are checkpoint::format_error naming the file and key.
#pragma once
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ctgrad::pretrained {

class HfConfig {
 public:
  explicit HfConfig(const std::filesystem::path& dir);               // reads dir/config.json
  HfConfig(nlohmann::json j, std::string where);                     // a parsed one (tests)
  const std::string& where() const { return where_; }
  bool has(const std::string& key) const;                             // present and not null
  bool present(const std::string& key) const;                         // present, null or not
  // The value of `key` (taken), or `fallback` when absent; a missing key without a fallback, or
  // a value of another type or outside [lo, hi], is refused naming the key.
  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback = std::nullopt, std::int64_t lo = 0,
                       std::int64_t hi = std::int64_t(1) << 40);
  double real(const std::string& key, std::optional<double> fallback = std::nullopt);
  bool flag(const std::string& key, std::optional<bool> fallback = std::nullopt);
  std::string text(const std::string& key, std::optional<std::string> fallback = std::nullopt);
  const nlohmann::json* object(const std::string& key);  // null when absent
  std::vector<std::string> strings(const std::string& key);  // a list of strings; empty when absent
  // The one dropout a ctgrad model has, from Hugging Face's several (each absent: `fallback`):
  // refused naming them when they differ, or when outside [0, 1).
  double one_dropout(std::initializer_list<const char*> keys, double fallback, const std::string& family);
  // Keys that change no computation (token ids, dtype, versions, initialisation): taken as read.
  void known(std::initializer_list<const char*> keys);
  // `key` (absent counts as `fallback`) must be `want`: what ctgrad computes; else refused naming both.
  template <class T>
  void require(const std::string& key, const T& want, const T& fallback, const std::string& why);
  // Refuses the first key not taken: "config.json: 'foo' is not supported by ctgrad's <family>".
  void finish(const std::string& family) const;
  [[noreturn]] void refuse(const std::string& message) const;

 private:
  // `key` taken: null when absent (with a fallback; without one, refused as missing), else the
  // value when `ok` accepts it, refused as "not <what>" otherwise.
  const nlohmann::json* take(const std::string& key, bool has_fallback, bool (*ok)(const nlohmann::json&), const char* what);
  nlohmann::json j_;
  std::string where_;
  std::set<std::string> taken_;
};

template <class T>
void HfConfig::require(const std::string& key, const T& want, const T& fallback, const std::string& why) {
  taken_.insert(key);
  if (!has(key)) {
    if (fallback == want) return;
    refuse("'" + key + "' is absent (" + nlohmann::json(fallback).dump() + "): " + why);
  }
  T v;
  try {
    v = j_.at(key).get<T>();
  } catch (const std::exception&) {
    refuse("'" + key + "' is " + j_.at(key).dump().substr(0, 80) + ", not a " + nlohmann::json(want).type_name());
  }
  if (!(v == want)) refuse("'" + key + "' is " + j_.at(key).dump().substr(0, 80) + ": " + why);
}

}  // namespace ctgrad::pretrained
