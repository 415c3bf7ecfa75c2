// Images from folders (data/image_folder.hpp): PNG and JPEG decoded, scaled and centre-cropped,
// grey or RGB; classes by folder; the split by a hash of each file; bad images named.
#include <catch2/catch.hpp>

#include <ctgrad/data/image_folder.hpp>
#include <ctgrad/data/text.hpp>

#include <fstream>

#include "data_errors.hpp"

#include "../scratch.hpp"
#include "image_writer.hpp"

using namespace ctgrad;
using namespace ctgrad::data;
namespace fs = std::filesystem;

namespace {
using ctgrad::testing::error_of;
// w x h RGB: red where x < w / 2, blue elsewhere.
std::vector<std::uint8_t> halves(int w, int h) {
  std::vector<std::uint8_t> px(std::size_t(w * h * 3), 0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) px[std::size_t((y * w + x) * 3 + (x < w / 2 ? 0 : 2))] = 200;
  return px;
}
}  // namespace

TEST_CASE("image folders: PNG and JPEG decoded, scaled to the size, centre-cropped, grey or RGB", "[data][images]") {
  const fs::path dir = testing::scratch("image_folder");
  fs::create_directories(dir / "a"), fs::create_directories(dir / "b"), fs::create_directories(dir / ".hidden");
  testing::write_png(dir / "a" / "1.png", 40, 20, 3, halves(40, 20));   // wide: cropped to its middle 20 x 20
  testing::write_jpeg(dir / "b" / "2.JPG", 10, 10, 3, halves(10, 10));  // small: enlarged
  std::ofstream(dir / "b" / "notes.txt") << "not an image: ignored";
  const ImageFolder f = read_image_folder(dir, {.size = 8, .channels = 3});
  REQUIRE(f.classes == std::vector<std::string>{"a", "b"});
  REQUIRE(f.images.count == 2);
  CHECK(f.images.labels == std::vector<std::int32_t>{0, 1});
  CHECK(f.images.pixels.size() == 2 * 3 * 8 * 8);
  // Image 0, red plane: left half 200, right half 0 (the crop keeps the middle, where red meets blue).
  const std::uint8_t* red = f.images.pixels.data();
  CHECK(red[0] == 200);
  CHECK(red[7] == 0);
  CHECK(red[3 * 8 + 2] == 200);
  const std::uint8_t* blue = red + 2 * 64;
  CHECK(blue[7] == 200);
  // JPEG is lossy: near the values.
  const std::uint8_t* jred = f.images.pixels.data() + 3 * 64;
  CHECK(std::abs(int(jred[0]) - 200) < 30);
  CHECK(int(jred[7]) < 30);
  // Grey: one plane of luminance.
  const ImageFolder g = read_image_folder(dir, {.size = 4, .channels = 1});
  CHECK(g.images.channels == 1);
  CHECK(g.images.pixels.size() == 2 * 16);
  CHECK(g.images.pixels[0] == 60);  // red 200's luma: 0.299 x 200, the same from PNG and JPEG
  CHECK(g.images.pixels[3] < g.images.pixels[0]);  // blue's is lower
  // The split by a hash of each file: the two sides part the images.
  const bool yes = true, no = false;
  const auto held = read_image_folder(dir, {.size = 4, .channels = 1, .val_fraction = 0.5}, &yes);
  const auto kept = read_image_folder(dir, {.size = 4, .channels = 1, .val_fraction = 0.5}, &no);
  CHECK(held.images.count + kept.images.count == 2);
  // Transparency is composited onto white.
  {
    const fs::path alpha = testing::scratch("image_alpha");
    fs::create_directories(alpha / "x"), fs::create_directories(alpha / "y");
    png_image im{};
    im.version = PNG_IMAGE_VERSION, im.width = 2, im.height = 2, im.format = PNG_FORMAT_RGBA;
    const std::uint8_t px[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 0, 0, 0, 255};  // top row transparent, bottom row opaque black
    REQUIRE(png_image_write_to_file(&im, (alpha / "x" / "a.png").c_str(), 0, px, 0, nullptr));
    fs::copy_file(alpha / "x" / "a.png", alpha / "y" / "a.png");
    const ImageFolder a = read_image_folder(alpha, {.size = 2, .channels = 3});
    CHECK(a.images.pixels[0] == 255);  // red plane, top-left: transparent -> white
    CHECK(a.images.pixels[2] == 0);    // bottom-left: opaque black
  }
  // A run's classes: a folder of another class is refused.
  CHECK_THAT(error_of([&] { read_image_folder(dir, {.size = 4, .channels = 1, .classes = {"a", "c"}}); }), Catch::Contains("is not one of the run's 2 classes"));
}

TEST_CASE("image folders: a bad image, an empty class, no classes, a bomb are refused naming them", "[data][images]") {
  const fs::path dir = testing::scratch("image_folder_bad");
  fs::create_directories(dir / "a"), fs::create_directories(dir / "b");
  testing::write_png(dir / "a" / "1.png", 8, 8, 1, std::vector<std::uint8_t>(64, 9));
  CHECK_THAT(error_of([&] { read_image_folder(dir, {}); }), Catch::Contains("class folder") && Catch::Contains("has no PNG or JPEG images"));
  std::ofstream(dir / "b" / "x.png") << "\x89PNG\r\n\x1a\n but then nothing";
  CHECK_THAT(error_of([&] { read_image_folder(dir, {}); }), Catch::Contains("x.png does not decode as PNG"));
  std::ofstream(dir / "b" / "x.png", std::ios::trunc) << "\xFF\xD8\xFF\xE0 truncated jpeg";
  CHECK_THAT(error_of([&] { read_image_folder(dir, {}); }), Catch::Contains("x.png does not decode as JPEG"));
  {  // a JPEG cut in its data: libjpeg would fill the rest with grey and warn; refused
    std::vector<std::uint8_t> noisy(std::size_t(128 * 128 * 3));
    for (std::size_t i = 0; i < noisy.size(); ++i) noisy[i] = std::uint8_t((i * 2654435761u) >> 13);
    testing::write_jpeg(dir / "b" / "x.png", 128, 128, 3, noisy);  // mostly entropy-coded data: the cut falls in it
    const auto size = fs::file_size(dir / "b" / "x.png");
    fs::resize_file(dir / "b" / "x.png", size * 2 / 3);
    CHECK_THAT(error_of([&] { read_image_folder(dir, {}); }), Catch::Contains("x.png does not decode as JPEG (the data is truncated or corrupt)"));
  }
  std::ofstream(dir / "b" / "x.png", std::ios::trunc) << "GIF89a";
  CHECK_THAT(error_of([&] { read_image_folder(dir, {}); }), Catch::Contains("is neither PNG nor JPEG"));
  testing::write_png(dir / "b" / "x.png", 300, 300, 1, std::vector<std::uint8_t>(90000, 1));
  CHECK_THAT(error_of([&] { read_image_folder(dir, {.max_pixels = 10000}); }), Catch::Contains("300 x 300 pixels, more than the bound"));
  const fs::path none = testing::scratch("image_folder_none");
  fs::create_directories(none);
  CHECK_THAT(error_of([&] { read_image_folder(none, {}); }), Catch::Contains("has no class folders"));
  CHECK_THAT(error_of([&] { read_image_folder(none / "missing", {}); }), Catch::Contains("no such folder"));
}
