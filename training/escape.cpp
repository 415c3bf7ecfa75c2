#include <ctgrad/training/escape.hpp>
#include <ctgrad/base/utf8.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace ctgrad::training {

namespace {
using text::is_c1;
using text::is_control;
using text::utf8_length;
std::string hex_byte(unsigned char c) {
  char b[8];
  std::snprintf(b, sizeof b, "\\x%02x", c);
  return b;
}
}  // namespace

std::string gnuplot_quote(std::string_view s) {
  std::string q = "\"";
  auto octal = [&](unsigned char c) {
    char b[8];
    std::snprintf(b, sizeof b, "\\%03o", unsigned(c));
    q += b;
  };
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (is_control(u)) {  // the visible text \xNN, its backslash escaped too
      q += "\\134";
      q += hex_byte(u).substr(1);
    } else if (std::string_view("\"\\`'@").find(c) != std::string_view::npos) {
      octal(u);
    } else {
      q += c;
    }
  }
  return q + "\"";
}

std::string gnuplot_label(std::string_view s) {
  std::string doubled;
  for (char c : s) doubled += c == '%' ? std::string("%%") : std::string(1, c);
  return gnuplot_quote(doubled);
}

std::string html_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += is_control(static_cast<unsigned char>(c)) ? std::string("\xEF\xBF\xBD") : std::string(1, c);
    }
  }
  return o;
}

std::string csv_field(std::string_view text) {
  std::string s(text);
  if (!s.empty() && std::string_view("=+-@\t\r").find(s[0]) != std::string_view::npos) {
    double v = 0;
    const char* from = s.data() + (s[0] == '+');  // from_chars takes no leading +
    const auto r = std::from_chars(from, s.data() + s.size(), v);
    const bool number = from < s.data() + s.size() && r.ptr == s.data() + s.size() && r.ec != std::errc::invalid_argument;
    if (!number) s = "'" + s;  // a formula, not a number
  }
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (std::size_t i = 0; i < fields.size(); ++i) line.append(i ? "," : "").append(csv_field(fields[i]));
  return line + "\n";
}

std::string markdown_code(std::string_view s) {
  std::size_t longest = 0, run = 0;
  std::string body;
  for (char c : s) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
    if (c == '|') body += "\\|";
    else if (is_control(static_cast<unsigned char>(c))) body += hex_byte(static_cast<unsigned char>(c));
    else body += c;
  }
  const std::string fence(longest + 1, '`');
  // A space inside the fence when the text starts or ends with a backtick (CommonMark strips one).
  const bool pad = !body.empty() && (body.front() == '`' || body.back() == '`');
  return fence + (pad ? " " : "") + body + (pad ? " " : "") + fence;
}

std::string markdown_text(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (std::string_view("\\`*_[]()!|#~").find(c) != std::string_view::npos) o.append(1, '\\').append(1, c);  // no link, image, emphasis or table cell
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (is_control(static_cast<unsigned char>(c))) o += hex_byte(static_cast<unsigned char>(c));
    else o += c;
  }
  return o;
}

std::string shell_quote(std::string_view s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./=,:+@%") == std::string_view::npos)
    return std::string(s);
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string shortened(std::string_view s, std::size_t most) {
  const std::string shown = printable(s);
  if (shown.size() <= most) return shown;
  return shown.substr(0, most > 20 ? most - 20 : 0) + "...(" + std::to_string(s.size()) + " bytes)";
}

std::string printable(std::string_view s) {
  std::string r;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8_length(s, i);
    if (n == 0 || is_c1(s, i, n) || (n == 1 && is_control(c))) {  // a byte of no character, or a control: shown as \xNN
      for (std::size_t k = 0; k < std::max<std::size_t>(n, 1); ++k) r += hex_byte(static_cast<unsigned char>(s[i + k]));
      i += std::max<std::size_t>(n, 1);
    } else {
      r.append(s.substr(i, n));
      i += n;
    }
  }
  return r;
}

std::string control_byte(std::string_view s) {
  char b[64];
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (is_control(c)) {
      std::snprintf(b, sizeof b, "byte 0x%02x at position %zu", c, i);
      return b;
    }
    if (c >= 0x80 && is_c1(s, i, utf8_length(s, i))) {
      std::snprintf(b, sizeof b, "U+%04X at position %zu", unsigned(static_cast<unsigned char>(s[i + 1])), i);
      return b;
    }
  }
  return "";
}

std::string utf8_error(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      char b[64];
      std::snprintf(b, sizeof b, "byte 0x%02x at position %zu", static_cast<unsigned char>(s[i]), i);
      return b;
    }
    i += n;
  }
  return "";
}

std::string format_number(double v, int digits, bool sign) {
  if (std::isnan(v)) return "";
  if (std::isinf(v)) return v > 0 ? (sign ? "+inf" : "inf") : "-inf";
  char b[64];  // the longest: a sign, 15 integer digits, a point and up to 17 decimals; or scientific
  const bool plain = std::fabs(v) < 1e15;
  const auto r = std::to_chars(b, b + sizeof b, v, plain ? std::chars_format::fixed : std::chars_format::scientific, digits < 0 ? 0 : digits > 17 ? 17 : digits);
  std::string out(b, r.ptr);
  return (sign && v >= 0 ? "+" : "") + out;
}

std::string exact_number(double v) {
  if (std::isnan(v)) return "";
  char b[64];
  const auto r = std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}

}  // namespace ctgrad::training
