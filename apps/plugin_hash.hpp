// A plug-in stamp's last line, "xxh3-128 <32 hex digits>\n": the XXH3-128 of the plug-in's bytes,
// as ctgrad-plugin-stamp writes it at build time and the command checks it before loading.
#pragma once
#include <cstdio>
#include <istream>
#include <string>
#include <vector>

#include <xxhash.h>

namespace ctgrad::cli {

inline std::string content_line(std::istream& in) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    XXH3_128bits_update(st, buf.data(), std::size_t(in.gcount()));
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  char line[64];
  std::snprintf(line, sizeof line, "xxh3-128 %016llx%016llx\n", (unsigned long long)h.high64, (unsigned long long)h.low64);
  return line;
}

}  // namespace ctgrad::cli
