// libFuzzer target: any bytes as a user's text file, read as JSON Lines (first byte even) or as
// text (odd), plain or compressed as its magic number says, and as labelled text in CSV (RFC 4180,
// libcsv). Refused with a data_error or read into documents that are UTF-8 and hold no NUL byte
// outside JSON strings, and labelled texts with a text and a label.
#include <ctgrad/data/text_source.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    char t[] = "/tmp/ctgrad-fuzz-text-XXXXXX";
    return std::string(::mkdtemp(t));
  }();
  const bool jsonl = size > 0 && data[0] % 2 == 0;
  const std::string file = dir + (jsonl ? "/in.jsonl" : "/in.txt");
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  try {
    ctgrad::data::for_each_document(file, {.max_line_bytes = 4096, .max_document_bytes = 1024}, [&](ctgrad::data::Document&& d) {
      if (ctgrad::data::invalid_utf8_at(d.text) != std::string::npos) std::abort();
      if (!jsonl && std::memchr(d.text.data(), 0, d.text.size())) std::abort();
    });
  } catch (const ctgrad::data::data_error&) {
  }
  std::remove(file.c_str());
  const std::string csv = dir + "/in.csv";
  std::ofstream(csv, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  try {
    for (const auto& t : ctgrad::data::read_labelled(csv, {.max_line_bytes = 4096}))
      if (t.text.empty() || t.label.empty()) std::abort();
  } catch (const ctgrad::data::data_error&) {
  }
  std::remove(csv.c_str());
  return 0;
}
