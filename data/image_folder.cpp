#include <ctgrad/data/image_folder.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/text_source.hpp>

// libjpeg's header needs <cstdio> first.
#include <cstdio>

#include <jpeglib.h>
#include <png.h>
#include <xxhash.h>

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <fstream>
#include <map>

namespace ctgrad::data {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool is_image_name(const fs::path& p) {
  const std::string e = lower(p.extension().string());
  return e == ".png" || e == ".jpg" || e == ".jpeg";
}

std::vector<std::uint8_t> read_bytes(const fs::path& f) {
  std::error_code ec;
  if (!fs::is_regular_file(f, ec)) throw data_error("ctgrad: image " + f.string() + " is not a regular file");
  std::ifstream in(f, std::ios::binary);
  std::vector<std::uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.eof() && in.fail()) throw data_error("ctgrad: cannot read image " + f.string());
  return b;
}

DecodedImage decode_png(const std::vector<std::uint8_t>& bytes, const std::string& name, int channels, std::int64_t max_pixels) {
  png_image im{};
  im.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&im, bytes.data(), bytes.size()))
    throw data_error("ctgrad: image " + name + " does not decode as PNG (" + im.message + ")");
  if (std::int64_t(im.width) * std::int64_t(im.height) > max_pixels) {
    png_image_free(&im);
    throw data_error("ctgrad: image " + name + " is " + std::to_string(im.width) + " x " + std::to_string(im.height) + " pixels, more than the bound of " +
                     std::to_string(max_pixels));
  }
  im.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  DecodedImage d{int(im.width), int(im.height), channels, std::vector<std::uint8_t>(PNG_IMAGE_SIZE(im))};
  // Transparency composited onto white: an icon's dark glyph on a transparent field stays visible
  // (onto black, Adwaita's symbolic icons all but vanish).
  const png_color white{255, 255, 255};
  if (!png_image_finish_read(&im, &white, d.pixels.data(), 0, nullptr))
    throw data_error("ctgrad: image " + name + " does not decode as PNG (" + im.message + ")");
  return d;
}

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

// libjpeg reports errors by longjmp: this function holds no object with a destructor between its
// setjmp and a jump back (the output is the caller's). 0: decoded; 1: a libjpeg error (message);
// 2: larger than max_pixels (w, h set).
int jpeg_into(const std::vector<std::uint8_t>& bytes, int channels, std::int64_t max_pixels, std::vector<std::uint8_t>* out, int* w, int* h, char* message) {
  jpeg_decompress_struct cinfo{};
  JpegError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = [](j_common_ptr c) {
    auto* e = reinterpret_cast<JpegError*>(c->err);
    c->err->format_message(c, e->message);
    std::longjmp(e->jump, 1);
  };
  err.mgr.output_message = [](j_common_ptr) {};  // warnings (a corrupt but decodable stream) stay quiet
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", err.message);
    return 1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  *w = int(cinfo.image_width), *h = int(cinfo.image_height);
  if (std::int64_t(cinfo.image_width) * std::int64_t(cinfo.image_height) > max_pixels) {
    jpeg_destroy_decompress(&cinfo);
    return 2;
  }
  cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  *w = int(cinfo.output_width), *h = int(cinfo.output_height);
  out->resize(std::size_t(*w) * std::size_t(*h) * std::size_t(channels));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->data() + std::size_t(cinfo.output_scanline) * std::size_t(*w) * std::size_t(channels);
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  const long warnings = err.mgr.num_warnings;  // a truncated or corrupt stream decodes with warnings: refused
  jpeg_destroy_decompress(&cinfo);
  if (warnings > 0) {
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", "the data is truncated or corrupt");
    return 1;
  }
  return 0;
}

DecodedImage decode_jpeg(const std::vector<std::uint8_t>& bytes, const std::string& name, int channels, std::int64_t max_pixels) {
  DecodedImage d;
  d.channels = channels;
  char message[JMSG_LENGTH_MAX] = {};
  const int r = jpeg_into(bytes, channels, max_pixels, &d.pixels, &d.width, &d.height, message);
  if (r == 1) throw data_error("ctgrad: image " + name + " does not decode as JPEG (" + message + ")");
  if (r == 2)
    throw data_error("ctgrad: image " + name + " is " + std::to_string(d.width) + " x " + std::to_string(d.height) + " pixels, more than the bound of " +
                     std::to_string(max_pixels));
  return d;
}

}  // namespace

// Grey is computed here from RGB for both formats (Rec. 601 luma of the stored values), so a picture
// is the same pixels whether it came as PNG or JPEG (libpng's own grey is gamma-corrected, libjpeg's not).
DecodedImage decode_image_bytes(const std::vector<std::uint8_t>& bytes, const std::string& name, int channels, std::int64_t max_pixels) {
  if (channels != 1 && channels != 3) throw data_error("ctgrad: images have 1 (grey) or 3 (RGB) channels, not " + std::to_string(channels));
  DecodedImage rgb;
  if (bytes.size() >= 8 && png_sig_cmp(bytes.data(), 0, 8) == 0) rgb = decode_png(bytes, name, 3, max_pixels);
  else if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) rgb = decode_jpeg(bytes, name, 3, max_pixels);
  else throw data_error("ctgrad: image " + name + " is neither PNG nor JPEG (" + (bytes.empty() ? "empty" : "by its first bytes") + ")");
  if (channels == 3) return rgb;
  DecodedImage grey{rgb.width, rgb.height, 1, std::vector<std::uint8_t>(std::size_t(rgb.width) * std::size_t(rgb.height))};
  for (std::size_t i = 0; i < grey.pixels.size(); ++i)
    grey.pixels[i] = std::uint8_t(std::lround(0.299 * rgb.pixels[3 * i] + 0.587 * rgb.pixels[3 * i + 1] + 0.114 * rgb.pixels[3 * i + 2]));
  return grey;
}

DecodedImage decode_image(const fs::path& file, int channels, std::int64_t max_pixels) {
  return decode_image_bytes(read_bytes(file), file.string(), channels, max_pixels);
}

// The crop's pixel (x, y) covers source [x0 + x s, x0 + (x + 1) s) (and likewise y) with s the
// source pixels per output pixel: averaged over the pixels it covers when shrinking (s >= 1), read
// bilinearly at its centre when enlarging.
void fit_square(const DecodedImage& im, int size, std::uint8_t* out) {
  const double s = double(std::min(im.width, im.height)) / double(size);
  const double x0 = (im.width - s * size) / 2, y0 = (im.height - s * size) / 2;
  const int C = im.channels;
  auto px = [&](int x, int y, int c) { return double(im.pixels[(std::size_t(y) * std::size_t(im.width) + std::size_t(x)) * std::size_t(C) + std::size_t(c)]); };
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) {
        double v = 0;
        if (s >= 1) {
          const int xa = int(std::floor(x0 + x * s)), xb = std::max(xa + 1, int(std::floor(x0 + (x + 1) * s)));
          const int ya = int(std::floor(y0 + y * s)), yb = std::max(ya + 1, int(std::floor(y0 + (y + 1) * s)));
          for (int yy = ya; yy < std::min(yb, im.height); ++yy)
            for (int xx = xa; xx < std::min(xb, im.width); ++xx) v += px(xx, yy, c);
          v /= double((std::min(yb, im.height) - ya) * (std::min(xb, im.width) - xa));
        } else {
          const double fx = std::clamp(x0 + (x + 0.5) * s - 0.5, 0.0, double(im.width - 1)), fy = std::clamp(y0 + (y + 0.5) * s - 0.5, 0.0, double(im.height - 1));
          const int ix = int(fx), iy = int(fy), jx = std::min(ix + 1, im.width - 1), jy = std::min(iy + 1, im.height - 1);
          const double ax = fx - ix, ay = fy - iy;
          v = (1 - ay) * ((1 - ax) * px(ix, iy, c) + ax * px(jx, iy, c)) + ay * ((1 - ax) * px(ix, jy, c) + ax * px(jx, jy, c));
        }
        out[(std::size_t(c) * std::size_t(size) + std::size_t(y)) * std::size_t(size) + std::size_t(x)] = std::uint8_t(std::lround(std::clamp(v, 0.0, 255.0)));
      }
}

ImageFolder read_image_folder(const fs::path& dir, const ImageFolderOptions& o, const bool* held) {
  if (o.size < 1 || o.size > 4096) throw data_error("ctgrad: an image size of " + std::to_string(o.size) + " pixels (1 to 4096)");
  if (o.channels != 1 && o.channels != 3) throw data_error("ctgrad: images have 1 (grey) or 3 (RGB) channels, not " + std::to_string(o.channels));
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) throw data_error("ctgrad: image folder " + dir.string() + ": no such folder");
  if (!fs::is_directory(st)) throw data_error("ctgrad: image folder " + dir.string() + " is not a folder");
  // Class folders, sorted; the images of each, sorted.
  std::map<std::string, std::vector<fs::path>> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with(".") || !e.is_directory(ec)) continue;
    auto& list = found[n];
    fs::recursive_directory_iterator it(e.path(), fs::directory_options::skip_permission_denied, ec), end;
    for (; it != end; it.increment(ec)) {
      const fs::path& f = it->path();
      if (f.filename().string().starts_with(".")) {
        if (it->is_directory(ec)) it.disable_recursion_pending();  // .thumbnails, .ipynb_checkpoints
        continue;
      }
      if (is_image_name(f) && !it->is_directory(ec)) list.push_back(f);
    }
    std::sort(list.begin(), list.end());
  }
  if (ec) throw data_error("ctgrad: image folder " + dir.string() + " cannot be read: " + ec.message());
  if (found.empty()) throw data_error("ctgrad: image folder " + dir.string() + " has no class folders (one subfolder of images per class)");
  for (const auto& [name, list] : found)
    if (list.empty()) throw data_error("ctgrad: class folder " + (dir / name).string() + " has no PNG or JPEG images");
  ImageFolder out;
  out.classes = o.classes;
  if (out.classes.empty())
    for (const auto& [name, list] : found) out.classes.push_back(name);
  if (found.size() < 2 && o.classes.empty()) throw data_error("ctgrad: image folder " + dir.string() + " has one class folder: a classifier needs two or more");
  std::vector<std::pair<fs::path, std::int32_t>> files;
  for (const auto& [name, list] : found) {
    const auto it = std::find(out.classes.begin(), out.classes.end(), name);
    if (it == out.classes.end())
      throw data_error("ctgrad: class folder " + (dir / name).string() + " is not one of the run's " + std::to_string(out.classes.size()) + " classes");
    for (const auto& f : list) files.emplace_back(f, std::int32_t(it - out.classes.begin()));
  }
  // Decoded in parallel; the split by a hash of each file's bytes.
  const std::size_t n = files.size(), S = std::size_t(o.size), C = std::size_t(o.channels);
  std::vector<std::vector<std::uint8_t>> planes(n);
  std::vector<char> keep(n, 1);
  std::vector<std::string> failed(n);
  tbb::parallel_for(std::size_t(0), n, [&](std::size_t i) {
    try {
      const std::vector<std::uint8_t> bytes = read_bytes(files[i].first);
      if (held) {
        const bool h = double(XXH3_64bits(bytes.data(), bytes.size()) >> 11) * 0x1p-53 < o.val_fraction;
        if (h != *held) return void(keep[i] = 0);
      }
      const DecodedImage im = decode_image_bytes(bytes, files[i].first.string(), o.channels, o.max_pixels);
      if (im.width < 1 || im.height < 1) throw data_error("ctgrad: image " + files[i].first.string() + " has no pixels");
      planes[i].resize(C * S * S);
      fit_square(im, o.size, planes[i].data());
    } catch (const data_error& e) {
      failed[i] = e.what();
    }
  });
  for (std::size_t i = 0; i < n; ++i)
    if (!failed[i].empty()) throw data_error(failed[i]);
  out.images.rows = out.images.cols = o.size, out.images.channels = o.channels;
  for (std::size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    out.images.pixels.insert(out.images.pixels.end(), planes[i].begin(), planes[i].end());
    out.images.labels.push_back(files[i].second);
    out.files.push_back(files[i].first.string());
    ++out.images.count;
  }
  return out;
}

}  // namespace ctgrad::data
