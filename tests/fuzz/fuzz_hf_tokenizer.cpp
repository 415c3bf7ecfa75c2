// libFuzzer target: any bytes as a Hugging Face tokenizer.json. Loading must refuse what it cannot
// use with a data_error (never crash, hang or exhaust memory); a tokenizer it accepts must encode
// varied text (scripts, emoji, whitespace runs, invalid UTF-8) and decode every id, or refuse with
// a data_error.
#include <ctgrad/data/hf_tokenizer.hpp>
#include <ctgrad/data/text.hpp>

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto t = ctgrad::data::HfTokenizer::parse(text, "fuzz.json");
    for (const char* s : {"Hello world", "  spaces\tand\nlines  ", "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80", "\xFF\xFE invalid \xC3", ""}) {
      const auto ids = t.encode(s, true);
      (void)t.decode(ids, false);
      (void)t.decode(ids, true);
    }
    std::vector<std::int32_t> all;
    for (std::int32_t id = 0; id < t.vocab_size() && id < 4096; ++id) all.push_back(id);
    (void)t.decode(all, false);
  } catch (const ctgrad::data::data_error&) {
  }
  return 0;
}
