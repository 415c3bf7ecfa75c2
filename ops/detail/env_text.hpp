// An environment variable's value as a one-line warning shows it: at most 40 bytes, cut at a
// character's boundary, every control character (C0, DEL, C1 such as U+009B) and every byte that
// is not UTF-8 as '?', so that a warning sends no escape sequence to the terminal.
#pragma once
#include <cstring>
#include <string>
#include <string_view>

namespace ctgrad::kernel {

inline std::string env_shown(const char* v) {
  const std::string_view s(v, ::strnlen(v, 256));
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool valid = n > 0 && i + n <= s.size() && (n == 1 || (c >= 0xc2 && c <= 0xf4));
    for (std::size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    const bool control = valid && ((n == 1 && (c < 0x20 || c == 0x7f)) || (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0));
    const bool text = valid && !control;
    if (out.size() + (text ? n : 1) > 40) break;
    if (text) out.append(s.substr(i, n));
    else out += '?';  // a control character is one '?', a byte of no character another
    i += valid ? n : 1;
  }
  return out;
}

}  // namespace ctgrad::kernel
