// The noise rate of T5's span corruption at each position of a sequence, over many draws: ours
// (spans placed without position bias) beside Google's layout. CSV on stdout for
// bench/t5_noise_by_position.sh, which plots it (docs/models/img/t5_noise_by_position.png).
//   ctgrad-span-noise LENGTH [DRAWS]   ->   position,ours,reference
#include <charconv>
#include <cstdio>
#include <cstring>
#include <vector>

#include <ctgrad/data/span_corruption.hpp>
#include <ctgrad/base/random.hpp>

int main(int argc, char** argv) {
  using namespace ctgrad;
  if (argc < 2) {
    std::fprintf(stderr, "usage: ctgrad-span-noise LENGTH [DRAWS]\n");
    return 2;
  }
  auto number = [](const char* s, std::int64_t& v) {
    const auto r = std::from_chars(s, s + std::strlen(s), v);
    return r.ec == std::errc() && *r.ptr == 0;
  };
  std::int64_t length = 0, draws = 100000;
  if (!number(argv[1], length) || (argc > 2 && !number(argv[2], draws)) || length < 2 || length > (1 << 20) || draws < 1) {
    std::fprintf(stderr, "ctgrad-span-noise: LENGTH in [2, 2^20] and DRAWS >= 1, as integers\n");
    return 2;
  }
  std::vector<double> ours(static_cast<std::size_t>(length)), ref(static_cast<std::size_t>(length));
  for (std::int64_t d = 0; d < draws; ++d) {
    const std::uint64_t key = random::key(11, std::uint64_t(length), std::uint64_t(d));
    const auto a = data::noise_mask(length, key, {});
    const auto b = data::noise_mask(length, key, {.reference_placement = true});
    for (std::int64_t i = 0; i < length; ++i) ours[std::size_t(i)] += a[std::size_t(i)], ref[std::size_t(i)] += b[std::size_t(i)];
  }
  std::printf("position,ours,reference\n");
  for (std::int64_t i = 0; i < length; ++i)
    std::printf("%lld,%.5f,%.5f\n", (long long)i, ours[std::size_t(i)] / double(draws), ref[std::size_t(i)] / double(draws));
  return 0;
}
