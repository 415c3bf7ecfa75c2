#include <ctgrad/data/text_source.hpp>

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include <zlib.h>
#include <zstd.h>

#include <csv.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

namespace ctgrad::data {

namespace fs = std::filesystem;

namespace {

std::string quoted(const fs::path& p) { return p.string(); }

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// What a path is when it is not a file or folder, for an error.
std::string special_kind(const fs::file_status& st) {
  switch (st.type()) {
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::block:
    case fs::file_type::character: return "a device";
    default: return "not a regular file";
  }
}

bool is_text_name(const fs::path& p) {
  std::string name = p.filename().string();
  for (const char* z : {".gz", ".zst"})
    if (name.size() > std::strlen(z) && name.ends_with(z)) name.resize(name.size() - std::strlen(z));
  return name.ends_with(".txt") || name.ends_with(".md") || name.ends_with(".jsonl");
}

bool is_jsonl(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.ends_with(".jsonl") || name.ends_with(".jsonl.gz") || name.ends_with(".jsonl.zst");
}

void add_path(const fs::path& p, std::vector<fs::path>& out, const std::string& spec) {
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (ec || !fs::exists(st)) throw data_error("ctgrad: data " + spec + ": no such file or folder" + (p.string() == spec ? "" : " " + quoted(p)));
  if (fs::is_regular_file(st)) return out.push_back(p);
  if (!fs::is_directory(st)) throw data_error("ctgrad: data " + quoted(p) + " is " + special_kind(st) + ", not a file or folder of text");
  std::vector<fs::path> found;
  fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) throw data_error("ctgrad: data folder " + quoted(p) + " cannot be read: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw data_error("ctgrad: data folder " + quoted(p) + " cannot be read: " + ec.message());
    const fs::path& e = it->path();
    if (e.filename().string().starts_with(".")) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (is_text_name(e) && it->is_regular_file(ec)) found.push_back(e);
  }
  if (found.empty())
    throw data_error("ctgrad: data folder " + quoted(p) + " has no text: no .txt, .md or .jsonl file (plain, .gz or .zst) in it or below it");
  std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) { return a.string() < b.string(); });
  out.insert(out.end(), found.begin(), found.end());
}

// The bytes of a file, decompressed when they start with gzip's or zstd's magic number.
class ByteSource {
 public:
  explicit ByteSource(const fs::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) throw data_error("ctgrad: cannot open data file " + quoted(path) + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw data_error("ctgrad: data " + quoted(path) + " is not a regular file (a FIFO, device or socket?)");
    }
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    try {
      start();
    } catch (...) {
      release();  // the constructor did not finish: no destructor runs
      throw;
    }
  }
  void start() {
    raw_.resize(1 << 16);
    fill();
    const auto* b = reinterpret_cast<const unsigned char*>(raw_.data() + raw_at_);
    const std::size_t have = raw_end_ - raw_at_;
    if (have >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
      kind_ = Kind::gzip;
      zs_ = std::make_unique<z_stream>();
      if (inflateInit2(zs_.get(), 16 + MAX_WBITS) != Z_OK) {
        zs_.reset();
        throw data_error("ctgrad: zlib cannot start on " + quoted(path_));
      }
    } else if (have >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) {
      kind_ = Kind::zstd;
      zd_ = ZSTD_createDStream();
      if (!zd_) throw data_error("ctgrad: zstd cannot start on " + quoted(path_));
    }
  }
  ~ByteSource() { release(); }
  void release() {
    if (zs_) inflateEnd(zs_.get()), zs_.reset();
    if (zd_) ZSTD_freeDStream(zd_), zd_ = nullptr;
    if (fd_ >= 0) ::close(fd_), fd_ = -1;
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Appends up to about 64 KiB of the file's (decompressed) bytes; false at its end.
  bool read(std::string& out) {
    if (kind_ == Kind::plain) {
      if (raw_at_ == raw_end_ && !fill()) return false;
      out.append(raw_.data() + raw_at_, raw_end_ - raw_at_);
      raw_at_ = raw_end_;
      return true;
    }
    for (;;) {
      if (raw_at_ == raw_end_ && !fill()) {
        if (!stream_done_) throw data_error("ctgrad: data file " + quoted(path_) + " ends inside its " + name() + " stream (truncated?)");
        return false;
      }
      const std::size_t before = out.size();
      out.resize(before + (1 << 16));
      std::size_t made = 0;
      if (kind_ == Kind::gzip) {
        if (stream_done_) {  // another gzip member follows
          inflateReset(zs_.get());
          stream_done_ = false;
        }
        zs_->next_in = reinterpret_cast<Bytef*>(raw_.data() + raw_at_);
        zs_->avail_in = uInt(raw_end_ - raw_at_);
        zs_->next_out = reinterpret_cast<Bytef*>(out.data() + before);
        zs_->avail_out = 1 << 16;
        const int r = inflate(zs_.get(), Z_NO_FLUSH);
        if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR)
          throw data_error("ctgrad: data file " + quoted(path_) + " is not valid gzip near byte " + std::to_string(consumed_ + (raw_end_ - raw_at_ - zs_->avail_in)) +
                           (zs_->msg ? std::string(" (") + zs_->msg + ")" : ""));
        const std::size_t used = (raw_end_ - raw_at_) - zs_->avail_in;
        raw_at_ += used, consumed_ += used;
        made = (1 << 16) - zs_->avail_out;
        stream_done_ = r == Z_STREAM_END;
      } else {
        ZSTD_inBuffer in{raw_.data() + raw_at_, raw_end_ - raw_at_, 0};
        ZSTD_outBuffer o{out.data() + before, 1 << 16, 0};
        const std::size_t r = ZSTD_decompressStream(zd_, &o, &in);
        if (ZSTD_isError(r))
          throw data_error("ctgrad: data file " + quoted(path_) + " is not valid zstd near byte " + std::to_string(consumed_ + in.pos) + " (" + ZSTD_getErrorName(r) + ")");
        raw_at_ += in.pos, consumed_ += in.pos;
        made = o.pos;
        stream_done_ = r == 0;
      }
      out.resize(before + made);
      if (made > 0) return true;
    }
  }

 private:
  enum class Kind { plain, gzip, zstd };
  std::string name() const { return kind_ == Kind::gzip ? "gzip" : "zstd"; }
  bool fill() {
    for (;;) {
      const ssize_t n = ::read(fd_, raw_.data(), raw_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw data_error("ctgrad: cannot read data file " + quoted(path_) + ": " + std::strerror(errno));
      raw_at_ = 0, raw_end_ = std::size_t(n);
      return n > 0;
    }
  }
  fs::path path_;
  int fd_ = -1;
  Kind kind_ = Kind::plain;
  std::string raw_;
  std::size_t raw_at_ = 0, raw_end_ = 0, consumed_ = 0;
  bool stream_done_ = false;
  std::unique_ptr<z_stream> zs_;
  ZSTD_DStream* zd_ = nullptr;
};

// A file's lines, checked: UTF-8, no NUL byte (binary), at most max_line_bytes each.
class LineReader {
 public:
  LineReader(const fs::path& path, std::size_t max_line) : path_(path), src_(path), max_line_(max_line) {}
  // The next line without its "\n" (nor a "\r" before it); false at the end.
  bool next(std::string& line) {
    for (;;) {
      const std::size_t nl = buf_.find('\n', at_);
      if (nl != std::string::npos || eof_) {
        if (nl == std::string::npos && at_ == buf_.size()) return false;
        const std::size_t end = nl == std::string::npos ? buf_.size() : nl;
        line.assign(buf_, at_, end - at_);
        check(line);
        offset_ += end - at_ + (nl != std::string::npos);
        at_ = nl == std::string::npos ? buf_.size() : nl + 1;
        ++number_;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (number_ == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
        return true;
      }
      if (buf_.size() - at_ > max_line_)
        throw data_error("ctgrad: data file " + quoted(path_) + ": line " + std::to_string(number_ + 1) + " is longer than " + mib(max_line_) +
                         " (is it text?)");
      buf_.erase(0, at_), at_ = 0;
      eof_ = !src_.read(buf_);
    }
  }
  std::int64_t number() const { return number_; }

 private:
  void check(const std::string& line) {
    const std::string where = "data file " + quoted(path_) + ": line " + std::to_string(number_ + 1);
    if (line.size() > max_line_) throw data_error("ctgrad: " + where + " is longer than " + mib(max_line_) + " (is it text?)");
    if (const void* z = std::memchr(line.data(), 0, line.size()))
      throw data_error("ctgrad: " + where + " has a NUL byte at byte " + std::to_string(offset_ + std::size_t(static_cast<const char*>(z) - line.data())) +
                       " of the file: it is binary, not text");
    if (const std::size_t bad = invalid_utf8_at(line); bad != std::string::npos)
      throw data_error("ctgrad: " + where + " is not UTF-8: invalid byte 0x" + hex(static_cast<unsigned char>(line[bad])) + " at byte " +
                       std::to_string(offset_ + bad) + " of the file");
  }
  static std::string hex(unsigned char c) {
    const char* d = "0123456789abcdef";
    return {d[c >> 4], d[c & 15]};
  }
  fs::path path_;
  ByteSource src_;
  std::size_t max_line_;
  std::string buf_;
  std::size_t at_ = 0, offset_ = 0;
  std::int64_t number_ = 0;
  bool eof_ = false;
};

}  // namespace

// Hand-written (a few lines; Debian 12 has no simdutf): the well-formed sequences of Unicode 15
// table 3-7, so overlong forms, surrogates and code points past U+10FFFF are refused.
std::size_t invalid_utf8_at(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return i;
    if (i + std::size_t(len) > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i + 1;
    for (int k = 2; k < len; ++k)
      if (p[i + std::size_t(k)] < 0x80 || p[i + std::size_t(k)] > 0xBF) return i + std::size_t(k);
    i += std::size_t(len);
  }
  return std::string::npos;
}

std::vector<fs::path> text_files(const std::string& spec) {
  if (spec.empty()) throw data_error("ctgrad: data is empty: give a file, a folder or a glob");
  std::vector<fs::path> out;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(spec, ec)) || spec.find_first_of("*?[") == std::string::npos) {
    add_path(spec, out, spec);
    return out;
  }
  glob_t g{};
  const int r = ::glob(spec.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> matches;
  if (r == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) matches.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (r == GLOB_NOMATCH || matches.empty()) throw data_error("ctgrad: data " + spec + ": no file matches the pattern");
  if (r != 0) throw data_error("ctgrad: data " + spec + ": the pattern cannot be expanded (a folder cannot be read)");
  std::sort(matches.begin(), matches.end());
  for (const auto& m : matches) add_path(m, out, spec);
  return out;
}

std::size_t for_each_document(const std::string& spec, const TextSourceOptions& o, const std::function<void(Document&&)>& each) {
  const std::vector<fs::path> files = text_files(spec);
  std::size_t documents = 0;
  std::string line;
  for (const fs::path& f : files) {
    LineReader lines(f, o.max_line_bytes);
    if (is_jsonl(f)) {
      while (lines.next(line)) {
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        const std::string where = "data file " + quoted(f) + ": line " + std::to_string(lines.number());
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded()) throw data_error("ctgrad: " + where + " is not JSON");
        if (!j.is_object()) throw data_error("ctgrad: " + where + " is JSON but not an object");
        const auto it = j.find(o.text_field);
        if (it == j.end()) throw data_error("ctgrad: " + where + " has no field \"" + o.text_field + "\" (text_field names the field holding the text)");
        if (!it->is_string()) throw data_error("ctgrad: " + where + ": field \"" + o.text_field + "\" is " + it->type_name() + ", not a string");
        std::string text = it->get<std::string>();
        if (text.empty()) continue;
        ++documents;
        each(Document{f.string() + ":" + std::to_string(lines.number()), std::move(text)});
      }
      continue;
    }
    std::string text;
    int part = 0;
    auto emit = [&] {
      if (text.find_first_not_of(" \t\n") != std::string::npos) {
        ++documents;
        each(Document{f.string() + (part > 0 || text.size() >= o.max_document_bytes ? "#" + std::to_string(part + 1) : ""), std::move(text)});
      }
      text.clear(), ++part;
    };
    while (lines.next(line)) {
      text += line, text += '\n';
      if (text.size() >= o.max_document_bytes) emit();
    }
    emit();
  }
  return documents;
}

void for_each_line(const fs::path& file, const TextSourceOptions& o, const std::function<void(std::string&, std::int64_t)>& fn) {
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (ec || !fs::exists(st)) throw data_error("ctgrad: data file " + quoted(file) + ": no such file");
  if (!fs::is_regular_file(st)) throw data_error("ctgrad: data " + quoted(file) + " is " + (fs::is_directory(st) ? "a folder" : special_kind(st)) + ", not a file");
  LineReader lines(file, o.max_line_bytes);
  std::string line;
  while (lines.next(line)) fn(line, lines.number());
}

std::vector<SentencePair> read_pairs(const std::string& spec, const PairOptions& o) {
  const TextSourceOptions lines_o{.max_line_bytes = o.max_line_bytes};
  std::vector<SentencePair> out;
  auto blank = [](const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; };
  if (spec.starts_with("pairs:")) {  // two line-aligned files
    const std::string list = spec.substr(6);
    const std::size_t comma = list.find(',');
    if (comma == std::string::npos || list.find(',', comma + 1) != std::string::npos)
      throw data_error("ctgrad: data " + spec + ": pairs:SOURCE,TARGET names two files, a comma between them");
    const fs::path a = list.substr(0, comma), b = list.substr(comma + 1);
    std::vector<std::string> left;
    for_each_line(a, lines_o, [&](std::string& l, std::int64_t) { left.push_back(std::move(l)); });
    std::size_t n = 0;
    for_each_line(b, lines_o, [&](std::string& r, std::int64_t number) {
      if (n >= left.size())
        throw data_error("ctgrad: data " + spec + ": " + quoted(b) + " has more lines than " + quoted(a) + "'s " + std::to_string(left.size()) + " (line " + std::to_string(number) + ")");
      std::string& l = left[n++];
      if (blank(l) && blank(r)) return;
      if (blank(l) || blank(r))
        throw data_error("ctgrad: data " + spec + ": line " + std::to_string(number) + " of " + quoted(blank(l) ? a : b) + " is empty where " +
                         quoted(blank(l) ? b : a) + " has text (a missing side)");
      out.push_back({std::move(l), std::move(r)});
    });
    if (n < left.size())
      throw data_error("ctgrad: data " + spec + ": " + quoted(b) + " has " + std::to_string(n) + " lines, " + quoted(a) + " " + std::to_string(left.size()));
  } else {
    std::error_code ec;
    if (fs::is_directory(spec, ec))
      throw data_error("ctgrad: data " + spec + " is a folder: pairs come from a .tsv or .jsonl file, a glob of them, or pairs:SOURCE,TARGET");
    for (const fs::path& f : text_files(spec)) {
      const bool jsonl = is_jsonl(f);
      for_each_line(f, lines_o, [&](std::string& line, std::int64_t number) {
        if (blank(line)) return;
        const std::string where = "data file " + quoted(f) + ": line " + std::to_string(number);
        if (jsonl) {
          const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
          if (j.is_discarded() || !j.is_object()) throw data_error("ctgrad: " + where + " is not a JSON object");
          const nlohmann::json& obj = !j.contains(o.source_field) && j.contains("translation") && j["translation"].is_object() ? j["translation"] : j;
          std::string side[2];
          for (int k = 0; k < 2; ++k) {
            const std::string& field = k ? o.target_field : o.source_field;
            const auto it = obj.find(field);
            if (it == obj.end() || !it->is_string())
              throw data_error("ctgrad: " + where + (it == obj.end() ? " has no field \"" + field + "\"" : ": field \"" + field + "\" is not a string") +
                               " (source_field and target_field name the pair's fields)");
            side[k] = it->get<std::string>();
            if (blank(side[k])) throw data_error("ctgrad: " + where + ": field \"" + field + "\" is empty (a missing side)");
          }
          out.push_back({std::move(side[0]), std::move(side[1])});
          return;
        }
        const std::size_t tab = line.find('\t');
        if (tab == std::string::npos) throw data_error("ctgrad: " + where + " has no tab: a pair is source, a tab, target");
        if (line.find('\t', tab + 1) != std::string::npos) throw data_error("ctgrad: " + where + " has more than two tab-separated fields");
        SentencePair p{line.substr(0, tab), line.substr(tab + 1)};
        if (blank(p.en) || blank(p.de)) throw data_error("ctgrad: " + where + ": its " + (blank(p.en) ? "source" : "target") + " is empty (a missing side)");
        out.push_back(std::move(p));
      });
    }
  }
  if (out.empty()) throw data_error("ctgrad: data " + spec + " holds no pairs");
  return out;
}

namespace {
void trim(std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  s = a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// A CSV file of labelled text (RFC 4180, through libcsv in strict mode: quoted fields may hold
// commas, quotes as "" and line breaks): a header row names the columns, text_field and label_field
// pick two of them.
void read_csv_labelled(const fs::path& f, const LabelOptions& o, const TextSourceOptions& lines_o, std::vector<LabelledText>& out) {
  struct State {
    std::vector<std::string> fields;
    std::vector<std::vector<std::string>> records;
    std::vector<std::int64_t> record_lines;
    std::int64_t line = 0;
  } st;
  csv_parser p{};
  if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0) throw data_error("ctgrad: libcsv cannot start");
  auto on_field = [](void* s, std::size_t n, void* d) { static_cast<State*>(d)->fields.emplace_back(static_cast<const char*>(s), n); };
  auto on_record = [](int, void* d) {
    auto* x = static_cast<State*>(d);
    x->records.push_back(std::move(x->fields)), x->record_lines.push_back(x->line), x->fields.clear();
  };
  std::size_t text_col = 0, label_col = 0;
  bool header = false;
  auto take = [&] {  // the records parsed so far
    for (std::size_t r = 0; r < st.records.size(); ++r) {
      auto& rec = st.records[r];
      const std::string where = "data file " + quoted(f) + ": line " + std::to_string(st.record_lines[r]);
      if (rec.size() == 1 && rec[0].find_first_not_of(" \t") == std::string::npos) continue;  // a blank line
      if (!header) {
        const auto col = [&](const std::string& name) {
          const auto it = std::find(rec.begin(), rec.end(), name);
          if (it == rec.end()) throw data_error("ctgrad: " + where + ": the header has no column \"" + name + "\" (text_field and label_field name the columns)");
          return std::size_t(it - rec.begin());
        };
        text_col = col(o.text_field), label_col = col(o.label_field), header = true;
        continue;
      }
      if (std::max(text_col, label_col) >= rec.size())
        throw data_error("ctgrad: " + where + " has " + std::to_string(rec.size()) + " fields; the header names " + std::to_string(std::max(text_col, label_col) + 1) + " or more");
      LabelledText t{rec[text_col], rec[label_col]};
      trim(t.label);
      if (t.text.find_first_not_of(" \t\n") == std::string::npos) throw data_error("ctgrad: " + where + ": its text is empty");
      if (t.label.find_first_not_of(" \t") == std::string::npos) throw data_error("ctgrad: " + where + ": its label is empty");
      out.push_back(std::move(t));
    }
    st.records.clear(), st.record_lines.clear();
  };
  try {
    for_each_line(f, lines_o, [&](std::string& line, std::int64_t number) {
      st.line = number;
      line += '\n';
      if (csv_parse(&p, line.data(), line.size(), on_field, on_record, &st) != line.size())
        throw data_error("ctgrad: data file " + quoted(f) + ": line " + std::to_string(number) + " is not CSV (" + csv_strerror(csv_error(&p)) + ")");
      take();
    });
    if (csv_fini(&p, on_field, on_record, &st) != 0)
      throw data_error("ctgrad: data file " + quoted(f) + " ends inside a quoted field (" + csv_strerror(csv_error(&p)) + ")");
    take();
  } catch (...) {
    csv_free(&p);
    throw;
  }
  csv_free(&p);
}
}  // namespace

std::vector<LabelledText> read_labelled(const std::string& spec, const LabelOptions& o) {
  if (o.text_field == o.label_field) throw data_error("ctgrad: text_field and label_field are both \"" + o.text_field + "\": name two fields");
  const TextSourceOptions lines_o{.max_line_bytes = o.max_line_bytes};
  std::vector<LabelledText> out;
  auto blank = [](const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; };
  std::error_code ec;
  if (fs::is_directory(spec, ec)) throw data_error("ctgrad: data " + spec + " is a folder: labelled text comes from a .tsv or .jsonl file, or a glob of them");
  for (const fs::path& f : text_files(spec)) {
    const bool jsonl = is_jsonl(f);
    std::string name = f.filename().string();
    for (const char* z : {".gz", ".zst"})
      if (name.ends_with(z)) name.resize(name.size() - std::strlen(z));
    if (name.ends_with(".csv")) {
      read_csv_labelled(f, o, lines_o, out);
      continue;
    }
    for_each_line(f, lines_o, [&](std::string& line, std::int64_t number) {
      if (blank(line)) return;
      const std::string where = "data file " + quoted(f) + ": line " + std::to_string(number);
      LabelledText t;
      if (jsonl) {
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) throw data_error("ctgrad: " + where + " is not a JSON object");
        const auto text = j.find(o.text_field), label = j.find(o.label_field);
        if (text == j.end() || !text->is_string())
          throw data_error("ctgrad: " + where + (text == j.end() ? " has no field \"" : ": not a string in \"") + o.text_field + "\" (text_field names it)");
        if (label == j.end() || !(label->is_string() || label->is_number_integer()))
          throw data_error("ctgrad: " + where + (label == j.end() ? " has no field \"" : ": neither a string nor an integer in \"") + o.label_field +
                           "\" (label_field names it)");
        t.text = text->get<std::string>();
        t.label = label->is_string() ? label->get<std::string>() : std::to_string(label->get<std::int64_t>());
      } else {
        const std::size_t tab = line.rfind('\t');
        if (tab == std::string::npos) throw data_error("ctgrad: " + where + " has no tab: a labelled line is text, a tab, its label");
        t.text = line.substr(0, tab), t.label = line.substr(tab + 1);
        if (number == 1 && t.label == o.label_field) return;  // a header
      }
      trim(t.label);  // "pos" and "pos " are one class
      if (blank(t.text)) throw data_error("ctgrad: " + where + ": its text is empty");
      if (blank(t.label)) throw data_error("ctgrad: " + where + ": its label is empty");
      out.push_back(std::move(t));
    });
  }
  if (out.empty()) throw data_error("ctgrad: data " + spec + " holds no labelled text");
  return out;
}

bool held_out(const std::string& text, double fraction) {
  return double(XXH3_64bits(text.data(), text.size()) >> 11) * 0x1p-53 < fraction;
}

Corpus read_corpus(const std::string& spec, const std::string& val_spec, double fraction, const TextSourceOptions& o) {
  if (!(fraction > 0 && fraction < 1) && val_spec.empty()) throw data_error("ctgrad: the validation fraction must lie in (0, 1)");
  Corpus c;
  const bool by_hash = val_spec.empty();
  std::size_t total = 0;
  auto count = [&](const Document& d) {
    total += d.text.size();
    if (o.max_total_bytes && total > o.max_total_bytes)
      throw data_error("ctgrad: data " + spec + " is more than the " + mib(o.max_total_bytes) +
                       " of text this machine's memory holds with its tokens: tokenize it into shards (ctgrad data tokenize) and train on those");
  };
  for_each_document(spec, o, [&](Document&& d) {
    count(d);
    (by_hash && held_out(d.text, fraction) ? c.validation : c.train).push_back(std::move(d.text));
  });
  if (c.train.empty() && c.validation.empty()) throw data_error("ctgrad: data " + spec + " has no text (its files are empty)");
  if (!by_hash) {
    for_each_document(val_spec, o, [&](Document&& d) {
      count(d);
      c.validation.push_back(std::move(d.text));
    });
    if (c.validation.empty()) throw data_error("ctgrad: val_data " + val_spec + " has no text (its files are empty)");
    c.split = "validation from " + val_spec;
    return c;
  }
  const std::size_t docs = c.train.size() + c.validation.size();
  if (!c.train.empty() && !c.validation.empty()) {
    c.split = std::to_string(c.validation.size()) + " of " + std::to_string(docs) + " documents held out by hash";
    return c;
  }
  // Too few documents for a split by document: the tail of each.
  std::vector<std::string> all = std::move(c.train);
  all.insert(all.end(), std::make_move_iterator(c.validation.begin()), std::make_move_iterator(c.validation.end()));
  c.train.clear(), c.validation.clear();
  for (std::string& d : all) {
    TextSplit s = split_text(d, 1 - fraction);
    c.train.push_back(std::move(s.train));
    if (!s.validation.empty()) c.validation.push_back(std::move(s.validation));
  }
  if (c.validation.empty())
    throw data_error("ctgrad: data " + spec + " is too short to hold out validation text (no line break past its first " +
                     std::to_string(int(100 * (1 - fraction))) + "%): give val_data");
  c.split = "the last " + std::to_string(int(100 * fraction + 0.5)) + "% of " + (docs == 1 ? "the document" : "each of " + std::to_string(docs) + " documents") +
            " held out";
  return c;
}

}  // namespace ctgrad::data
