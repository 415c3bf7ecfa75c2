// RoPE's frequency scaling kinds (ops/rotary.hpp), apart so that model configs can name them
// without the graph headers.
#pragma once
#include <cstdint>

namespace ctgrad {

enum class RopeScaling : std::uint8_t { none, linear, llama3 };

}  // namespace ctgrad
