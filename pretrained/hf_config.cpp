#include <ctgrad/pretrained/hf_config.hpp>

#include <algorithm>
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

const nlohmann::json* HfConfig::take(const std::string& key, bool has_fallback, bool (*ok)(const nlohmann::json&), const char* what) {
  taken_.insert(key);
  if (!has(key)) {
    if (!has_fallback) refuse("'" + key + "' is missing");
    return nullptr;
  }
  const nlohmann::json& v = j_.at(key);
  if (!ok(v)) refuse("'" + key + "' is " + v.dump().substr(0, 80) + ", not " + what);
  return &v;
}

std::int64_t HfConfig::integer(const std::string& key, std::optional<std::int64_t> fallback, std::int64_t lo, std::int64_t hi) {
  const nlohmann::json* v = take(key, fallback.has_value(), [](const nlohmann::json& x) { return x.is_number_integer(); }, "an integer");
  if (!v) return *fallback;
  const std::int64_t n = v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t(INT64_MAX) ? INT64_MAX : v->get<std::int64_t>();
  if (n < lo || n > hi) refuse("'" + key + "' is " + std::to_string(n) + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return n;
}

double HfConfig::real(const std::string& key, std::optional<double> fallback) {
  const nlohmann::json* v =
      take(key, fallback.has_value(), [](const nlohmann::json& x) { return x.is_number() && std::isfinite(x.get<double>()); }, "a finite number");
  return v ? v->get<double>() : *fallback;
}

bool HfConfig::flag(const std::string& key, std::optional<bool> fallback) {
  const nlohmann::json* v = take(key, fallback.has_value(), [](const nlohmann::json& x) { return x.is_boolean(); }, "true or false");
  return v ? v->get<bool>() : *fallback;
}

std::string HfConfig::text(const std::string& key, std::optional<std::string> fallback) {
  const nlohmann::json* v = take(key, fallback.has_value(), [](const nlohmann::json& x) { return x.is_string(); }, "a string");
  return v ? v->get<std::string>() : *fallback;
}

const nlohmann::json* HfConfig::object(const std::string& key) {
  return take(key, true, [](const nlohmann::json& x) { return x.is_object(); }, "an object");
}

std::vector<std::string> HfConfig::strings(const std::string& key) {
  const nlohmann::json* v = take(
      key, true, [](const nlohmann::json& x) { return x.is_array() && std::all_of(x.begin(), x.end(), [](const nlohmann::json& e) { return e.is_string(); }); },
      "a list of strings");
  return v ? v->get<std::vector<std::string>>() : std::vector<std::string>{};
}

double HfConfig::one_dropout(std::initializer_list<const char*> keys, double fallback, const std::string& family) {
  std::string names, values;
  double first = 0;
  bool same = true;
  for (const char* k : keys) {
    const double v = real(k, fallback);
    if (names.empty()) first = v;
    same = same && v == first;
    const bool last = k == *(keys.end() - 1);
    names += names.empty() ? k : (last ? std::string(" and ") : std::string(", ")) + k;
    values += (values.empty() ? "" : ", ") + std::to_string(v);
  }
  if (!same) refuse(names + " differ (" + values + "): ctgrad's " + family + " has one dropout");
  if (!(first >= 0 && first < 1)) refuse(std::string(*keys.begin()) + " must be in [0, 1)");
  return first;
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
