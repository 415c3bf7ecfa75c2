// The UTF-8 rules every layer that shows text shares (ops' environment warnings, training's
// escaping for terminals, JSON, gnuplot, HTML): what a character is, and which ones are controls.
#pragma once
#include <cstddef>
#include <string_view>

namespace ctgrad::text {

// C0 controls and DEL.
inline bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

// The length of the valid UTF-8 sequence at s[i] (1 for ASCII), or 0 for a byte that starts none:
// no overlong forms, surrogates or code points past U+10FFFF.
inline std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
  if (n < 0 || i + std::size_t(n) >= s.size() + (n == 0)) return 0;
  for (int k = 1; k <= n; ++k)
    if ((static_cast<unsigned char>(s[i + std::size_t(k)]) >> 6) != 2) return 0;
  if (n > 0) {
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c < 0xc2 || (c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) || (c == 0xf0 && c1 < 0x90) || c > 0xf4 || (c == 0xf4 && c1 >= 0x90)) return 0;
  }
  return std::size_t(n) + 1;
}

// The offset of the first byte of s that starts no valid UTF-8 sequence, or npos when s is UTF-8.
inline std::size_t invalid_utf8_at(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}
inline bool valid_utf8(std::string_view s) { return invalid_utf8_at(s) == std::string_view::npos; }

// U+0080..U+009F, the C1 controls (CSI, OSC, ...), as the n-byte character at s[i]: a terminal acts
// on them as on ESC sequences.
inline bool is_c1(std::string_view s, std::size_t i, std::size_t n) {
  return n == 2 && static_cast<unsigned char>(s[i]) == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;
}

}  // namespace ctgrad::text
