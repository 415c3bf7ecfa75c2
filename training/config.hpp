// Run configurations: a schema of typed keys (integer, real, text, choice, flag) with defaults,
// ranges and help, and the configs it parses. `--set key=value`, a `--config` JSON file and the
// config stored in a checkpoint all go through the same strict parser: an unknown key (with the
// closest known one), a value of the wrong type, trailing junk ("5xyz"), a number out of its range,
// a non-object or too deeply nested JSON document are a config_error naming the key and the source.
//
//   Schema s;
//   s.integer("steps", 2000, {.min = 1}, "training steps")
//    .real("lr", 1e-3, {.min = 0, .min_open = true}, "peak learning rate")
//    .choice("tokenizer", "char", {"char", "bpe"}, "characters or SentencePiece BPE", Role::model);
//   Config c = s.defaults();
//   c.set("steps", "500", "--set");         // throws config_error on bad input
//   std::int64_t steps = c.integer("steps");
//
// A key's role says what a checkpoint pins: a model key (sizes, tokenizer) must match in every
// command that loads the checkpoint; a run key (batch, seeds: the data order) must match on
// resume; free keys (steps, the schedule, evaluation) may change.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ctgrad::training {

// Bad configuration input: the command exits with 2.
struct config_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

enum class Kind { integer, real, text, choice, flag };
enum class Role { free, run, model };

struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false, max_open = false;  // (min, ...] instead of [min, ...]
};

using Value = std::variant<std::int64_t, double, std::string, bool>;

struct Key {
  std::string name, help;
  Kind kind = Kind::integer;
  Role role = Role::free;
  Value default_value;
  Range range;
  std::vector<std::string> choices;
  // A model key added after checkpoints existed: one that lacks it was written before it, when
  // its default was the only behaviour, so the default is used (with a warning), not refused.
  bool added_later = false;
  // Written into a saved config only when set away from its default (an added_later key whose
  // default is what every config before it meant): a run that uses none of them saves the bytes
  // an older version saved.
  bool stated_when_set = false;
};

class Config;

class Schema {
 public:
  Schema& integer(std::string name, std::int64_t value, Range range, std::string help, Role role = Role::free);
  Schema& real(std::string name, double value, Range range, std::string help, Role role = Role::free);
  Schema& text(std::string name, std::string value, std::string help, Role role = Role::free);
  Schema& choice(std::string name, std::string value, std::vector<std::string> choices, std::string help, Role role = Role::free);
  Schema& flag(std::string name, bool value, std::string help, Role role = Role::free);

  // Marks keys as added after checkpoints existed (Key::added_later).
  Schema& added_later(std::initializer_list<std::string_view> names);
  // Marks keys as added later and stated only away from their defaults (Key::stated_when_set).
  Schema& stated_when_set(std::initializer_list<std::string_view> names);

  const Key* find(std::string_view name) const;
  const Key& key(std::string_view name) const;  // throws config_error naming the closest key
  const std::vector<Key>& keys() const { return keys_; }
  Config defaults() const;
  // One line per key: name, type, default, range or choices, help.
  std::string describe() const;

 private:
  Schema& add(Key k);
  std::vector<Key> keys_;
};

class Config {
 public:
  explicit Config(const Schema& schema);

  std::int64_t integer(std::string_view key) const;
  double real(std::string_view key) const;  // a real key, or an integer one
  const std::string& text(std::string_view key) const;  // a text or choice key
  bool flag(std::string_view key) const;
  const Value& value(std::string_view key) const;
  bool was_set(std::string_view key) const { return set_.count(std::string(key)) != 0; }  // by the user, not a default
  const Schema& schema() const { return *schema_; }

  // "key=value" (from --set) and key, value, parsed strictly by the key's kind and range;
  // `source` names where it came from in errors ("--set", "config file run.json").
  void set(std::string_view key_equals_value, std::string_view source = "--set");
  void set(std::string_view key, std::string_view value, std::string_view source);
  void set_value(std::string_view key, const Value& v, std::string_view source);

  // The keys of a JSON object: every member must be a known key of the right type; at most
  // kMaxDepth levels of nesting are read (deeper documents are refused, not recursed into).
  static constexpr int kMaxDepth = 64;
  void merge_json(std::string_view json_text, std::string_view source);
  std::string to_json() const;
  // The values that differ from `other` for keys of at least `role` ("size small vs medium").
  std::vector<std::string> differences(const Config& other, Role at_least) const;
  std::string show(std::string_view key) const;  // the value as text

 private:
  const Schema* schema_;
  std::map<std::string, Value, std::less<>> values_;
  std::set<std::string, std::less<>> set_;
};

// Strict numbers: the whole text, finite, in range. Used by the command-line options too.
std::int64_t parse_integer(std::string_view text, std::string_view what, Range range = {});
double parse_real(std::string_view text, std::string_view what, Range range = {});

// The closest of `known` to `name` by edit distance, when it is close; "" otherwise.
std::string closest(std::string_view name, const std::vector<std::string>& known);

}  // namespace ctgrad::training
