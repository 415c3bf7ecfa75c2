// Strings written into another language: one function per target, so that a user's string (a run
// folder, a study name, a grid value, a token) is data in the text it lands in, never code.
// tests/training/test_escape.cpp tries newlines, quotes, `<script>` and control bytes against each,
// and against every writer that uses them (the gnuplot scripts, the study's CSV, JSON, HTML, Markdown).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ctgrad::training {

// gnuplot: a double-quoted string in which " \ ` ' @ are octal escapes (\042 ...): the line then
// holds no backquote to run as a command, no @ to expand as a macro, and no quote (gnuplot 5.4
// reads a single-quoted string opening with '' as empty). A control byte (a newline would end the
// command) is written as the visible text \xNN. Paths are not passed this way but as arguments of
// the script (see gnuplot() in log.hpp).
std::string gnuplot_quote(std::string_view s);
// A tic label given with its position (set xtics ('label' 0, ...)): gnuplot reads it as a format
// string for the position, so a % is doubled; then quoted as above.
std::string gnuplot_label(std::string_view s);

// HTML text and attribute values: & < > " ' as entities; a control byte as U+FFFD.
std::string html_escape(std::string_view s);

// CSV (RFC 4180): the field as is when it holds no comma, quote, CR or LF; else in double quotes,
// a quote doubled. A text field that a spreadsheet would run as a formula (starting with = + - @,
// tab or CR, and not a number) gets a leading ' (OWASP's advice for CSV injection).
std::string csv_field(std::string_view s);
// A CSV record: the fields through csv_field, joined by commas, ended by a newline.
std::string csv_line(const std::vector<std::string>& fields);

// Markdown: `s` as an inline code span that survives a GitHub table: a fence longer than any run
// of backticks in it, | as \|, a control byte (a newline would end the row) as \xNN.
std::string markdown_code(std::string_view s);

// Markdown text (a heading, a sentence): < > & as entities (no raw HTML), the punctuation of links,
// images, emphasis and tables backslash-escaped, control bytes as \xNN.
std::string markdown_text(std::string_view s);

// POSIX shell: one word in single quotes (' as '\''), for commands shown to be copied.
std::string shell_quote(std::string_view s);

// A terminal line: control characters (C0, DEL, the newline included, and C1: U+0080..U+009F) and
// bytes that are not UTF-8 as \xNN, so that an error message stays one line and sends no escape.
std::string printable(std::string_view s);
// printable(s) when it is at most `most` bytes, else its first most - 20 and "...(N bytes)": a
// long value named in a one-line message.
std::string shortened(std::string_view s, std::size_t most);

// The first control character of `s` as "byte 0x0a at position 3" (< 0x20, 0x7f) or "U+009B at
// position 3" (a C1 control in UTF-8), or "" when none.
std::string control_byte(std::string_view s);

// The first byte where `s` stops being UTF-8, as "byte 0xff at position 3", or "" when it is UTF-8.
std::string utf8_error(std::string_view s);

// A number for a report: fixed with `digits` decimals while that is exact enough to read
// (|v| < 1e15), else scientific (1e308 is "1.0000e+308", not 309 digits); inf as "inf"/"-inf";
// NaN (not measured) as "". `sign` writes + before a positive number.
std::string format_number(double v, int digits, bool sign = false);
// A number for data (CSV): the shortest text that reads back as the same double; NaN as "".
std::string exact_number(double v);

}  // namespace ctgrad::training
