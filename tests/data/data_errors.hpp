// The message of the data_error a call throws, or "(no error)": for checks on the readers' errors.
#pragma once
#include <functional>
#include <string>

#include <ctgrad/data/text.hpp>

namespace ctgrad::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const data::data_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ctgrad::testing
