#include <ctgrad/training/config.hpp>
#include <ctgrad/graph/tensor.hpp>
#include <ctgrad/training/escape.hpp>

#include <charconv>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace ctgrad::training {
namespace {

using json = nlohmann::json;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::integer: return "an integer";
    case Kind::real: return "a number";
    case Kind::text: return "a string";
    case Kind::choice: return "one of the choices";
    case Kind::flag: return "true or false";
  }
  return "?";
}

std::string number_text(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(std::int64_t(v));
  char b[32];

  std::snprintf(b, sizeof b, "%.17g", v);
  // The shortest text that reads back as v.
  for (int p = 1; p <= 17; ++p) {
    char s[32];
    std::snprintf(s, sizeof s, "%.*g", p, v);
    if (std::strtod(s, nullptr) == v) return s;
  }
  return b;
}

std::string range_text(const Range& r) {
  const bool lo = std::isfinite(r.min), hi = std::isfinite(r.max);
  if (!lo && !hi) return "";
  std::string s = lo ? std::string(r.min_open ? "(" : "[") + number_text(r.min) : std::string("(-inf");
  s += ", ";
  s += hi ? number_text(r.max) + (r.max_open ? ")" : "]") : std::string("inf)");
  return s;
}

// A value as it may be shown in a message: control bytes (a NUL from a JSON "\u0000") as \xNN,
// at most 80 bytes.
std::string shown(std::string_view v) { return printable(v.substr(0, 80)) + (v.size() > 80 ? "..." : ""); }

bool in_range(double v, const Range& r) {
  if (r.min_open ? !(v > r.min) : !(v >= r.min)) return false;
  if (r.max_open ? !(v < r.max) : !(v <= r.max)) return false;
  return true;
}

// JSON nesting depth of a document, counted on the text before it is parsed (a parser that
// recurses would overflow the stack on 100,000 brackets first). Brackets inside strings are skipped.
int nesting(std::string_view text) {
  int depth = 0, most = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') most = std::max(most, ++depth);
    else if (c == ']' || c == '}') --depth;
  }
  return most;
}

}  // namespace

std::int64_t parse_integer(std::string_view text, std::string_view what, Range range) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && p == end && !in_range(double(v), range)))
  {  // an integer's open end is the 64-bit bound, said as a number
    Range bounded = range;
    if (!std::isfinite(bounded.max)) bounded.max = 9223372036854775807.0, bounded.max_open = false;
    if (!std::isfinite(bounded.min)) bounded.min = -9223372036854775807.0 - 1, bounded.min_open = false;
    std::string text_range = range_text(bounded);
    if (!std::isfinite(range.max)) text_range = text_range.substr(0, text_range.rfind(", ")) + ", 9223372036854775807]";
    if (!std::isfinite(range.min)) text_range = "[-9223372036854775808" + text_range.substr(text_range.find(", "));
    throw config_error(std::string(what) + " must be an integer in " + text_range + ", got '" + shown(text) + "'");
  }
  if (ec != std::errc() || p != end || text.empty())
    throw config_error(std::string(what) + " expects an integer, got '" + shown(text) + "'");
  return v;
}

double parse_real(std::string_view text, std::string_view what, Range range) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || text.empty() || !std::isfinite(v)) {
    if (ec == std::errc::result_out_of_range) throw config_error(std::string(what) + " is out of the range of a double: '" + shown(text) + "'");
    throw config_error(std::string(what) + " expects a number, got '" + shown(text) + "'");
  }
  if (!in_range(v, range)) throw config_error(std::string(what) + " must be in " + range_text(range) + ", got " + shown(text));
  return v;
}

std::string closest(std::string_view name, const std::vector<std::string>& known) {
  std::vector<std::string_view> views(known.begin(), known.end());
  return std::string(closest_name(name, views));
}

// --- Schema ---

Schema& Schema::add(Key k) {
  for (const Key& o : keys_)
    if (o.name == k.name) throw std::logic_error("ctgrad: config key '" + k.name + "' declared twice");
  keys_.push_back(std::move(k));
  return *this;
}
Schema& Schema::integer(std::string name, std::int64_t value, Range range, std::string help, Role role) {
  return add({std::move(name), std::move(help), Kind::integer, role, value, range, {}});
}
Schema& Schema::real(std::string name, double value, Range range, std::string help, Role role) {
  return add({std::move(name), std::move(help), Kind::real, role, value, range, {}});
}
Schema& Schema::text(std::string name, std::string value, std::string help, Role role) {
  return add({std::move(name), std::move(help), Kind::text, role, std::move(value), {}, {}});
}
Schema& Schema::choice(std::string name, std::string value, std::vector<std::string> choices, std::string help, Role role) {
  return add({std::move(name), std::move(help), Kind::choice, role, std::move(value), {}, std::move(choices)});
}
Schema& Schema::flag(std::string name, bool value, std::string help, Role role) {
  return add({std::move(name), std::move(help), Kind::flag, role, value, {}, {}});
}

Schema& Schema::stated_when_set(std::initializer_list<std::string_view> names) {
  added_later(names);
  for (Key& k : keys_)
    for (std::string_view n : names)
      if (k.name == n) k.stated_when_set = true;
  return *this;
}

Schema& Schema::added_later(std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    for (Key& k : keys_)
      if (k.name == n) k.added_later = true;
  return *this;
}

const Key* Schema::find(std::string_view name) const {
  for (const Key& k : keys_)
    if (k.name == name) return &k;
  return nullptr;
}

const Key& Schema::key(std::string_view name) const {
  if (const Key* k = find(name)) return *k;
  std::vector<std::string> names;
  for (const Key& k : keys_) names.push_back(k.name);
  const std::string near = closest(name, names);
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw config_error("unknown config key '" + shown(name) + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                     "; known keys: " + known);
}

Config Schema::defaults() const { return Config(*this); }

std::string Schema::describe() const {
  std::string s;
  for (const Key& k : keys_) {
    Config c(*this);
    std::string line = "  " + k.name;
    line.resize(std::max<std::size_t>(line.size() + 1, 18), ' ');
    std::string what = k.kind == Kind::choice ? "" : kind_name(k.kind);
    for (const char* article : {"an ", "a "})
      if (what.rfind(article, 0) == 0) what = what.substr(std::strlen(article));
    if (k.kind == Kind::choice) {
      for (const auto& ch : k.choices) what += (what.empty() ? "" : "|") + ch;
    } else if (!range_text(k.range).empty()) {
      what += " in " + range_text(k.range);
    }
    line += c.show(k.name) + "  (" + what + ")  " + k.help;
    s += line + "\n";
  }
  return s;
}

// --- Config ---

Config::Config(const Schema& schema) : schema_(&schema) {
  for (const Key& k : schema.keys()) values_[k.name] = k.default_value;
}

const Value& Config::value(std::string_view key) const {
  schema_->key(key);
  return values_.find(key)->second;
}
std::int64_t Config::integer(std::string_view key) const {
  const Key& k = schema_->key(key);
  if (k.kind != Kind::integer) throw std::logic_error("ctgrad: config key '" + k.name + "' is not an integer");
  return std::get<std::int64_t>(values_.find(key)->second);
}
double Config::real(std::string_view key) const {
  const Key& k = schema_->key(key);
  if (k.kind == Kind::integer) return double(std::get<std::int64_t>(values_.find(key)->second));
  if (k.kind != Kind::real) throw std::logic_error("ctgrad: config key '" + k.name + "' is not a number");
  return std::get<double>(values_.find(key)->second);
}
const std::string& Config::text(std::string_view key) const {
  const Key& k = schema_->key(key);
  if (k.kind != Kind::text && k.kind != Kind::choice) throw std::logic_error("ctgrad: config key '" + k.name + "' is not text");
  return std::get<std::string>(values_.find(key)->second);
}
bool Config::flag(std::string_view key) const {
  const Key& k = schema_->key(key);
  if (k.kind != Kind::flag) throw std::logic_error("ctgrad: config key '" + k.name + "' is not a flag");
  return std::get<bool>(values_.find(key)->second);
}

void Config::set(std::string_view kv, std::string_view source) {
  const auto eq = kv.find('=');
  if (eq == std::string_view::npos) throw config_error(std::string(source) + " expects key=value, got '" + shown(kv) + "'");
  set(kv.substr(0, eq), kv.substr(eq + 1), source);
}

namespace {
// "config key 'lr' (--set)", or "option --top-p" for a command's own option.
std::string what_of(const Key& k, std::string_view source) {
  if (source == "--" + k.name) return "option " + std::string(source);
  return "config key '" + k.name + "' (" + std::string(source) + ")";
}
}  // namespace

void Config::set(std::string_view key, std::string_view text, std::string_view source) {
  const Key& k = schema_->key(key);
  const std::string what = what_of(k, source);
  Value v;
  switch (k.kind) {
    case Kind::integer: v = parse_integer(text, what, k.range); break;
    case Kind::real: v = parse_real(text, what, k.range); break;
    case Kind::text: v = std::string(text); break;
    case Kind::choice: v = std::string(text); break;
    case Kind::flag:
      if (text == "true" || text == "1") v = true;
      else if (text == "false" || text == "0") v = false;
      else throw config_error(what + " expects true or false, got '" + shown(text) + "'");
      break;
  }
  set_value(key, v, source);
}

void Config::set_value(std::string_view key, const Value& v, std::string_view source) {
  const Key& k = schema_->key(key);
  const std::string what = what_of(k, source);
  Value got = v;
  switch (k.kind) {
    case Kind::integer:
      if (!std::holds_alternative<std::int64_t>(got)) throw config_error(what + " expects an integer");
      if (!in_range(double(std::get<std::int64_t>(got)), k.range))
        throw config_error(what + " must be in " + range_text(k.range) + ", got " + std::to_string(std::get<std::int64_t>(got)));
      break;
    case Kind::real:
      if (std::holds_alternative<std::int64_t>(got)) got = double(std::get<std::int64_t>(got));
      if (!std::holds_alternative<double>(got) || !std::isfinite(std::get<double>(got))) throw config_error(what + " expects a finite number");
      if (!in_range(std::get<double>(got), k.range))
        throw config_error(what + " must be in " + range_text(k.range) + ", got " + number_text(std::get<double>(got)));
      break;
    case Kind::text:
    case Kind::choice: {
      if (!std::holds_alternative<std::string>(got)) throw config_error(what + " expects a string");
      // A config value is stored in checkpoints (JSON) and named in reports and plots: UTF-8,
      // and one line. A command's own text options (a prompt) may hold newlines.
      const std::string& text = std::get<std::string>(got);
      if (const std::string bad = utf8_error(text); !bad.empty()) throw config_error(what + " is not UTF-8 text (" + bad + ")");
      if (const std::string bad = control_byte(text); !bad.empty() && source != "--" + k.name)
        throw config_error(what + " holds a control character (" + bad + "): '" + shown(text) + "'");
      if (k.kind == Kind::text) break;
      bool ok = false;
      std::string list;
      for (const auto& c : k.choices) ok |= c == std::get<std::string>(got), list += (list.empty() ? "" : ", ") + c;
      if (!ok) throw config_error(what + " is '" + shown(std::get<std::string>(got)) + "', not one of: " + list);
      break;
    }
    case Kind::flag:
      if (!std::holds_alternative<bool>(got)) throw config_error(what + " expects true or false");
      break;
  }
  values_[k.name] = got;
  set_.insert(k.name);
}

void Config::merge_json(std::string_view text, std::string_view source) {
  // nlohmann's parser stops at a NUL byte as at the end of input: what follows would go unread.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw config_error(std::string(source) + " holds a NUL byte at offset " + std::to_string(nul) + ": not a JSON text file");
  if (nesting(text) > kMaxDepth)
    throw config_error(std::string(source) + " nests deeper than " + std::to_string(kMaxDepth) + " levels");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    // The parser's message without its "[json.exception.parse_error.101] " tag, as one printable line.
    std::string why = e.what();
    if (const auto close = why.find("] "); why.rfind("[json.exception.", 0) == 0 && close != std::string::npos) why = why.substr(close + 2);
    throw config_error(std::string(source) + " is not valid JSON (" + printable(why.substr(0, 200)) + ")");
  }
  auto a = [](const char* type) { return std::string(std::string_view("aeiou").find(type[0]) != std::string_view::npos ? "an " : "a ") + type; };
  if (!doc.is_object()) throw config_error(std::string(source) + " must be a JSON object of config keys, got " + a(doc.type_name()));
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const json& v = *it;
    // (nlohmann counts unsigned numbers as integers too: one past INT64_MAX must not wrap.)
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX))
      throw config_error("config key '" + it.key() + "' (" + std::string(source) + ") is out of the 64-bit integer range: " + v.dump());
    if (v.is_number_integer()) set_value(it.key(), std::int64_t(v.get<std::int64_t>()), source);
    else if (v.is_number_float()) set_value(it.key(), v.get<double>(), source);
    else if (v.is_string()) {
      const Key& k = schema_->key(it.key());
      // A number written as a string ("1e-3") is read as the number it spells.
      if (k.kind == Kind::text || k.kind == Kind::choice) set_value(it.key(), v.get<std::string>(), source);
      else set(it.key(), v.get<std::string>(), source);
    } else if (v.is_boolean()) set_value(it.key(), v.get<bool>(), source);
    else throw config_error("config key '" + it.key() + "' (" + std::string(source) + ") has " + a(v.type_name()) + " value");
  }
}

std::string Config::to_json() const {
  json j = json::object();
  for (const Key& k : schema_->keys()) {
    const Value& v = values_.find(k.name)->second;
    if (k.stated_when_set && v == k.default_value) continue;
    std::visit([&](const auto& x) { j[k.name] = x; }, v);
  }
  return j.dump();
}

std::string Config::show(std::string_view key) const {
  const Value& v = value(key);
  if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) return number_text(*d);
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

std::vector<std::string> Config::differences(const Config& other, Role at_least) const {
  std::vector<std::string> d;
  for (const Key& k : schema_->keys())
    if (int(k.role) >= int(at_least) && show(k.name) != other.show(k.name))
      d.push_back(k.name + " " + other.show(k.name) + ", not " + show(k.name));
  return d;
}

}  // namespace ctgrad::training
