// Images from folders, one subfolder per class (torchvision's ImageFolder layout): PNG through
// libpng, JPEG through libjpeg-turbo, each scaled so its shorter side is the configured size and
// centre-cropped to a square, grey or RGB as configured.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ctgrad/data/idx.hpp>

namespace ctgrad::data {

struct ImageFolderOptions {
  int size = 32;      // the side of the square each image becomes
  int channels = 3;   // 1: grey, 3: RGB
  // The classes, in output order: a trained run's (an image folder of another class is refused).
  // Empty: the subfolders' names, sorted.
  std::vector<std::string> classes = {};
  double val_fraction = 0;  // > 0: split_images() holds out images by a hash of their bytes
  std::int64_t max_pixels = std::int64_t(1) << 26;  // a larger image (a decompression bomb) is refused
};

struct ImageFolder {
  ImageSet images;  // pixels [count, channels, size, size]
  std::vector<std::string> classes;
  std::vector<std::string> files;  // of each image, for errors and listings
};

// The images of every class subfolder of `dir` (.png, .jpg, .jpeg, any case; other files and hidden
// names ignored), decoded in parallel. `held`: when not null, only the images whose held_out() side
// (by a hash of the file's bytes) is *held; null: all. Refused naming the file or folder: no class
// folders, a class folder without images, an image that does not decode or is too large.
ImageFolder read_image_folder(const std::filesystem::path& dir, const ImageFolderOptions& o, const bool* held = nullptr);

// One image file decoded to 8-bit grey (channels 1) or RGB (3), interleaved: width, height, pixels.
struct DecodedImage {
  int width = 0, height = 0, channels = 0;
  std::vector<std::uint8_t> pixels;
};
DecodedImage decode_image(const std::filesystem::path& file, int channels, std::int64_t max_pixels = std::int64_t(1) << 26);
DecodedImage decode_image_bytes(const std::vector<std::uint8_t>& bytes, const std::string& name, int channels, std::int64_t max_pixels = std::int64_t(1) << 26);

// Scaled (area average down, bilinear up) so the shorter side is `size`, centre-cropped to size x
// size; planar out: [channels, size, size].
void fit_square(const DecodedImage& im, int size, std::uint8_t* out);

}  // namespace ctgrad::data
