// Counter-based random numbers: the value for (key, counter) depends on nothing else, so
// parameter init, dropout and masking give the same bits on any number of threads.
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace ctgrad::random {

constexpr std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A stream key from a seed and a name (FNV-1a of the name).
constexpr std::uint64_t key(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return mix(seed ^ mix(h));
}
constexpr std::uint64_t key(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  return mix(mix(seed ^ mix(a)) ^ b);
}

constexpr std::uint64_t bits(std::uint64_t key, std::uint64_t counter) {
  return mix(key ^ mix(counter));
}

// Uniform in [0, 1), 53 bits.
constexpr double uniform(std::uint64_t key, std::uint64_t counter) {
  return double(bits(key, counter) >> 11) * 0x1.0p-53;
}

// Standard normal (Box-Muller on two counters).
inline double normal(std::uint64_t key, std::uint64_t counter) {
  double u1 = uniform(key, 2 * counter), u2 = uniform(key, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace ctgrad::random
