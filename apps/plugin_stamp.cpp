// ctgrad-plugin-stamp HEADER PLUGIN OUT: writes a plug-in's stamp (apps/plugins.hpp), the text of
// git_commit.h it was built with and the XXH3-128 of its file, so that the command loads only a
// plug-in of its own source state whose bytes are the ones the build wrote.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "plugin_hash.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: ctgrad-plugin-stamp GIT_COMMIT_H PLUGIN OUT\n");
    return 2;
  }
  std::ifstream header(argv[1], std::ios::binary), plugin(argv[2], std::ios::binary);
  std::stringstream text;
  text << header.rdbuf();
  if (!header || !plugin) {
    std::fprintf(stderr, "ctgrad-plugin-stamp: cannot read %s or %s\n", argv[1], argv[2]);
    return 1;
  }
  const std::string line = ctgrad::cli::content_line(plugin);
  if (plugin.bad()) {
    std::fprintf(stderr, "ctgrad-plugin-stamp: cannot read %s\n", argv[2]);
    return 1;
  }
  std::ofstream out(argv[3], std::ios::binary | std::ios::trunc);
  out << text.str() << line;
  return out ? 0 : 1;
}
