// An environment variable's value as a one-line warning shows it: at most 40 bytes, cut at a
// character's boundary, every control character (C0, DEL, C1 such as U+009B) and every byte that
// is not UTF-8 as '?', so that a warning sends no escape sequence to the terminal.
#pragma once
#include <cstring>
#include <string>
#include <string_view>

#include <ctgrad/base/utf8.hpp>

namespace ctgrad::kernel {

inline std::string env_shown(const char* v) {
  const std::string_view s(v, ::strnlen(v, 256));
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = text::utf8_length(s, i);
    const bool valid = n > 0;
    const bool control = valid && ((n == 1 && text::is_control(static_cast<unsigned char>(s[i]))) || text::is_c1(s, i, n));
    const bool shown = valid && !control;
    if (out.size() + (shown ? n : 1) > 40) break;
    if (shown) out.append(s.substr(i, n));
    else out += '?';  // a control character is one '?', a byte of no character another
    i += valid ? n : 1;
  }
  return out;
}

}  // namespace ctgrad::kernel
