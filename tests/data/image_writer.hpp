// Writing test images: PNG through libpng's simplified API, JPEG through libjpeg (the tests make
// every image they read).
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <jpeglib.h>
#include <png.h>

namespace ctgrad::testing {

// pixels: interleaved, channels 1 (grey) or 3 (RGB), row-major.
inline void write_png(const std::filesystem::path& file, int width, int height, int channels, const std::vector<std::uint8_t>& pixels) {
  png_image im{};
  im.version = PNG_IMAGE_VERSION;
  im.width = png_uint_32(width), im.height = png_uint_32(height);
  im.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  if (!png_image_write_to_file(&im, file.c_str(), 0, pixels.data(), 0, nullptr)) throw std::runtime_error("cannot write " + file.string());
}

inline void write_jpeg(const std::filesystem::path& file, int width, int height, int channels, const std::vector<std::uint8_t>& pixels) {
  FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + file.string());
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = JDIMENSION(width), c.image_height = JDIMENSION(height), c.input_components = channels;
  c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<std::uint8_t*>(pixels.data()) + std::size_t(c.next_scanline) * std::size_t(width) * std::size_t(channels);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

}  // namespace ctgrad::testing
