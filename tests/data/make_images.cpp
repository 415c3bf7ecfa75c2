// ctgrad-test-images DIR [PER_CLASS]: a data set of synthetic RGB images in DIR/<class>/, for the
// command's tests of data=images:DIR: a bright disc, a bright square and horizontal stripes on
// noise, of varied sizes (24 to 47 pixels a side, not square), every other one a JPEG.
#include <cstdlib>
#include <string>

#include <ctgrad/base/random.hpp>

#include "image_writer.hpp"

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: ctgrad-test-images DIR [PER_CLASS]\n"), 2;
  const std::filesystem::path dir = argv[1];
  const int per_class = argc > 2 ? std::atoi(argv[2]) : 40;
  const char* classes[] = {"disc", "square", "stripes"};
  for (int k = 0; k < 3; ++k) {
    std::filesystem::create_directories(dir / classes[k]);
    for (int i = 0; i < per_class; ++i) {
      const std::uint64_t key = ctgrad::random::key(std::uint64_t(k), std::uint64_t(i), 99);
      const int w = 24 + int(ctgrad::random::bits(key, 0) % 24), h = 24 + int(ctgrad::random::bits(key, 1) % 24);
      std::vector<std::uint8_t> px(std::size_t(w * h * 3));
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          const double cx = x - w / 2.0, cy = y - h / 2.0, r = 0.3 * std::min(w, h);
          const bool on = k == 0 ? cx * cx + cy * cy < r * r : k == 1 ? std::abs(cx) < r && std::abs(cy) < r : (y / 4) % 2 == 0;
          for (int c = 0; c < 3; ++c) {
            const int noise = int(ctgrad::random::bits(key, std::uint64_t(3 + (y * w + x) * 3 + c)) % 60);
            px[std::size_t((y * w + x) * 3 + c)] = std::uint8_t(on ? 190 + noise : noise);
          }
        }
      const std::string name = std::to_string(i) + (i % 2 ? ".jpg" : ".png");
      if (i % 2) ctgrad::testing::write_jpeg(dir / classes[k] / name, w, h, 3, px);
      else ctgrad::testing::write_png(dir / classes[k] / name, w, h, 3, px);
    }
  }
  return 0;
}
