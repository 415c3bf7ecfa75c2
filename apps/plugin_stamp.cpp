// ctgrad-plugin-stamp HEADER PLUGIN OUT: writes a plug-in's stamp (apps/plugins.hpp), the text of
// git_commit.h it was built with and the XXH3-128 of its file, so that the command loads only a
// plug-in of its own source state whose bytes are the ones the build wrote.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <xxhash.h>

namespace {
bool read(const char* path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  out = s.str();
  return bool(f);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: ctgrad-plugin-stamp GIT_COMMIT_H PLUGIN OUT\n");
    return 2;
  }
  std::string header, plugin;
  if (!read(argv[1], header) || !read(argv[2], plugin)) {
    std::fprintf(stderr, "ctgrad-plugin-stamp: cannot read %s or %s\n", argv[1], argv[2]);
    return 1;
  }
  const XXH128_hash_t h = XXH3_128bits(plugin.data(), plugin.size());
  char line[64];
  std::snprintf(line, sizeof line, "xxh3-128 %016llx%016llx\n", (unsigned long long)h.high64, (unsigned long long)h.low64);
  std::ofstream out(argv[3], std::ios::binary | std::ios::trunc);
  out << header << line;
  return out ? 0 : 1;
}
