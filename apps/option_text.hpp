// A value of the command line that names a file, a folder or a study (--run, --out, --name, ...):
// one line of UTF-8 text, refused (config_error naming the option and the byte) when it holds a
// control character or bytes that are not UTF-8 (it is shown on the terminal, and a study's
// options go into JSON, HTML, Markdown).
#pragma once
#include <string>

#include <ctgrad/training/config.hpp>
#include <ctgrad/training/escape.hpp>

namespace ctgrad::cli {

inline const std::string& one_line(const std::string& option, const std::string& value) {
  if (const std::string bad = training::control_byte(value); !bad.empty())
    throw training::config_error(option + " holds a control character (" + bad + "): '" + training::printable(value.substr(0, 80)) + "'");
  if (const std::string bad = training::utf8_error(value); !bad.empty())
    throw training::config_error(option + " is not UTF-8 text (" + bad + ")");
  return value;
}

}  // namespace ctgrad::cli
