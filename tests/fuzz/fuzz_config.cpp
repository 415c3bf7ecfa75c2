// libFuzzer target: any text as a `--config` JSON document and as `--set key=value` lines, against
// a schema of every kind of key. Bad input must be a config_error, nothing else.
#include <ctgrad/training/config.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace {
const ctgrad::training::Schema& schema() {
  using namespace ctgrad::training;
  static const Schema s = [] {
    Schema s;
    s.choice("size", "small", {"tiny", "small"}, "preset", Role::model)
        .integer("batch", 12, {.min = 1, .max = 1 << 16}, "batch", Role::run)
        .integer("steps", 2000, {.min = 1}, "steps")
        .real("lr", 1e-3, {.min = 0, .max = 10, .min_open = true}, "rate")
        .real("beta2", 0.99, {.min = 0, .max = 1, .max_open = true}, "beta2")
        .text("prompt", "And God said", "text")
        .flag("augment", false, "flag");
    return s;
  }();
  return s;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ctgrad::training::Config c = schema().defaults();
  try {
    c.merge_json(text, "fuzz");
    ctgrad::training::Config back = schema().defaults();
    back.merge_json(c.to_json(), "round trip");  // what it wrote it reads back
  } catch (const ctgrad::training::config_error&) {
  }
  for (std::size_t at = 0; at <= text.size();) {  // each line as --set key=value
    const std::size_t end = std::min(text.find('\n', at), text.size());
    try {
      c.set(text.substr(at, end - at), "--set");
    } catch (const ctgrad::training::config_error&) {
    }
    at = end + 1;
  }
  return 0;
}
