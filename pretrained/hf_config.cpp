#include <ctgrad/pretrained/hf_config.hpp>

#include <cmath>

#include <ctgrad/checkpoint/safetensors.hpp>

namespace ctgrad::pretrained {

namespace {
constexpr std::size_t kMaxConfigBytes = std::size_t(4) << 20;  // a config is a few KB
}

HfConfig::HfConfig(const std::filesystem::path& dir) : where_("ctgrad: model folder " + dir.string() + ": config.json") {
  const auto bytes = checkpoint::read_regular_file(dir / "config.json", where_, kMaxConfigBytes);
  if (checkpoint::json_nesting(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())) > 32) refuse("its JSON nests deeper than 32 levels");
  try {
    j_ = nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data()), reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  } catch (const std::exception& e) {
    refuse(std::string("not JSON: ") + std::string(e.what()).substr(0, 200));
  }
  if (!j_.is_object()) refuse("not a JSON object");
}

HfConfig::HfConfig(nlohmann::json j, std::string where) : j_(std::move(j)), where_(std::move(where)) {
  if (!j_.is_object()) refuse("not a JSON object");
}

void HfConfig::refuse(const std::string& message) const { throw checkpoint::format_error(where_ + ": " + message); }

bool HfConfig::has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
bool HfConfig::present(const std::string& key) const { return j_.contains(key); }

const nlohmann::json& HfConfig::at(const std::string& key) {
  taken_.insert(key);
  return j_.at(key);
}

std::int64_t HfConfig::integer(const std::string& key, std::optional<std::int64_t> fallback, std::int64_t lo, std::int64_t hi) {
  taken_.insert(key);
  if (!has(key)) {
    if (!fallback) refuse("'" + key + "' is missing");
    return *fallback;
  }
  const nlohmann::json& v = at(key);
  if (!v.is_number_integer()) refuse("'" + key + "' is " + v.dump().substr(0, 80) + ", not an integer");
  const std::int64_t n = v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX) ? INT64_MAX : v.get<std::int64_t>();
  if (n < lo || n > hi) refuse("'" + key + "' is " + std::to_string(n) + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return n;
}

double HfConfig::real(const std::string& key, std::optional<double> fallback) {
  taken_.insert(key);
  if (!has(key)) {
    if (!fallback) refuse("'" + key + "' is missing");
    return *fallback;
  }
  const nlohmann::json& v = at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) refuse("'" + key + "' is " + v.dump().substr(0, 80) + ", not a finite number");
  return v.get<double>();
}

bool HfConfig::flag(const std::string& key, std::optional<bool> fallback) {
  taken_.insert(key);
  if (!has(key)) {
    if (!fallback) refuse("'" + key + "' is missing");
    return *fallback;
  }
  const nlohmann::json& v = at(key);
  if (!v.is_boolean()) refuse("'" + key + "' is " + v.dump().substr(0, 80) + ", not true or false");
  return v.get<bool>();
}

std::string HfConfig::text(const std::string& key, std::optional<std::string> fallback) {
  taken_.insert(key);
  if (!has(key)) {
    if (!fallback) refuse("'" + key + "' is missing");
    return *fallback;
  }
  const nlohmann::json& v = at(key);
  if (!v.is_string()) refuse("'" + key + "' is " + v.dump().substr(0, 80) + ", not a string");
  return v.get<std::string>();
}

const nlohmann::json* HfConfig::object(const std::string& key) {
  taken_.insert(key);
  if (!has(key)) return nullptr;
  const nlohmann::json& v = at(key);
  if (!v.is_object()) refuse("'" + key + "' is " + v.dump().substr(0, 80) + ", not an object");
  return &v;
}

std::vector<std::string> HfConfig::strings(const std::string& key) {
  taken_.insert(key);
  if (!has(key)) return {};
  const nlohmann::json& v = at(key);
  std::vector<std::string> out;
  if (v.is_array())
    for (const auto& e : v)
      if (e.is_string()) out.push_back(e.get<std::string>());
  if (!v.is_array() || out.size() != v.size()) refuse("'" + key + "' is " + v.dump().substr(0, 80) + ", not a list of strings");
  return out;
}

void HfConfig::known(std::initializer_list<const char*> keys) {
  for (const char* k : keys) taken_.insert(k);
}

void HfConfig::finish(const std::string& family) const {
  for (auto it = j_.begin(); it != j_.end(); ++it)
    if (!taken_.count(it.key()))
      refuse("'" + it.key() + "' (" + it->dump().substr(0, 60) + ") is not a field ctgrad's " + family + " reads: refused rather than ignored");
}

}  // namespace ctgrad::pretrained
