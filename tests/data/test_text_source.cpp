// A user's text (data/text_source.hpp), token shards (data/token_shards.hpp), windows within
// documents (data/batches.hpp) and the character tokenizer's unknown id.
#include <catch2/catch.hpp>

#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/text_source.hpp>
#include <ctgrad/data/token_shards.hpp>
#include <ctgrad/data/tokenizer.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <fstream>

#include "data_errors.hpp"

using namespace ctgrad::data;
namespace fs = std::filesystem;

namespace {
struct TempDir {
  fs::path dir;
  TempDir() {
    char t[] = "/tmp/ctgrad-text-XXXXXX";
    dir = ::mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(dir); }
  fs::path write(const std::string& name, const std::string& bytes) const {
    const fs::path p = dir / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

std::string gzip(const std::string& s) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, uLong(s.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data())), z.avail_in = uInt(s.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data()), z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string zstd(const std::string& s) {
  std::string out(ZSTD_compressBound(s.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), s.data(), s.size(), 3));
  return out;
}

std::vector<Document> read_all(const std::string& spec, TextSourceOptions o = {}) {
  std::vector<Document> d;
  for_each_document(spec, o, [&](Document&& x) { d.push_back(std::move(x)); });
  return d;
}

using ctgrad::testing::error_of;
}  // namespace

TEST_CASE("a folder's text files are read recursively in path order, plain, gzip or zstd", "[data][text]") {
  TempDir t;
  t.write("b.txt", "second\r\n");
  t.write("a/z.md", "\xEF\xBB\xBF" "first\nline two\n");
  t.write("c.txt.gz", gzip("third\n"));
  t.write("d.txt.zst", zstd("fourth"));
  t.write("e.jsonl", "{\"text\": \"fifth\"}\n\n{\"text\": \"sixth\", \"id\": 2}\n");
  t.write(".hidden.txt", "never");
  t.write(".git/x.txt", "never");
  t.write("image.png", "never");
  const auto d = read_all(t.dir.string());
  REQUIRE(d.size() == 6);
  CHECK(d[0].text == "first\nline two\n");  // the BOM dropped
  CHECK(d[1].text == "second\n");           // "\r\n" read as "\n"
  CHECK(d[2].text == "third\n");
  CHECK(d[3].text == "fourth\n");
  CHECK(d[4].text == "fifth");
  CHECK(d[5].text == "sixth");
  CHECK(d[5].source == (t.dir / "e.jsonl").string() + ":3");
  // A glob: its matches sorted; a file named directly is read whatever its name.
  CHECK(read_all((t.dir / "*.txt*").string()).size() == 3);
  CHECK(read_all((t.dir / "image.png").string())[0].text == "never\n");
  // The field of a JSON Lines record is a choice.
  t.write("f/g.jsonl", "{\"body\": \"x\"}\n");
  CHECK(read_all((t.dir / "f").string(), {.text_field = "body"})[0].text == "x");
}

TEST_CASE("bad text is refused naming the file, the line and the byte", "[data][text]") {
  TempDir t;
  const auto bad = [&](const std::string& name, const std::string& bytes, TextSourceOptions o = {}) {
    return error_of([&] { read_all(t.write(name, bytes).string(), o); });
  };
  CHECK_THAT(bad("u.txt", "ok\nab\xC3(cd\n"), Catch::Contains("u.txt: line 2 is not UTF-8: invalid byte 0x28 at byte 6"));
  CHECK_THAT(bad("o.txt", "\xC0\xAF"), Catch::Contains("not UTF-8: invalid byte 0xc0 at byte 0"));           // overlong
  CHECK_THAT(bad("s.txt", "x\xED\xA0\x80"), Catch::Contains("not UTF-8: invalid byte 0xa0 at byte 2"));      // a surrogate
  CHECK_THAT(bad("n.txt", std::string("text\nbin\0ary", 12)), Catch::Contains("line 2 has a NUL byte at byte 8 of the file: it is binary"));
  CHECK_THAT(bad("l.txt", std::string(3000, 'x'), {.max_line_bytes = 1024}), Catch::Contains("line 1 is longer than"));
  CHECK_THAT(bad("j.jsonl", "{\"text\": \"a\"}\n{\"text\": \n"), Catch::Contains("j.jsonl: line 2 is not JSON"));
  CHECK_THAT(bad("k.jsonl", "{\"txt\": \"a\"}\n"), Catch::Contains("line 1 has no field \"text\""));
  CHECK_THAT(bad("m.jsonl", "{\"text\": 3}\n"), Catch::Contains("field \"text\" is number, not a string"));
  CHECK_THAT(bad("a.jsonl", "[1]\n"), Catch::Contains("JSON but not an object"));
  CHECK_THAT(bad("z.txt.gz", gzip(std::string(5000, 'a')).substr(0, 30)), Catch::Contains("ends inside its gzip stream"));
  CHECK_THAT(bad("y.txt.zst", zstd(std::string(5000, 'a') + "xyz").substr(0, 12)), Catch::Contains("ends inside its zstd stream"));
  CHECK_THAT(bad("x.txt.gz", "\x1f\x8b" + std::string(40, 'q')), Catch::Contains("is not valid gzip"));
  fs::create_directories(t.dir / "none");
  t.write("none/pic.png", "x");
  CHECK_THAT(error_of([&] { read_all((t.dir / "none").string()); }), Catch::Contains("has no text: no .txt, .md or .jsonl file"));
  CHECK_THAT(error_of([&] { read_all((t.dir / "missing").string()); }), Catch::Contains("no such file or folder"));
  CHECK_THAT(error_of([&] { read_all((t.dir / "q*.txt").string()); }), Catch::Contains("no file matches"));
  REQUIRE(::mkfifo((t.dir / "fifo").c_str(), 0600) == 0);
  CHECK_THAT(error_of([&] { read_all((t.dir / "fifo").string()); }), Catch::Contains("is a FIFO"));
  CHECK_THAT(error_of([&] { read_all("/dev/zero"); }), Catch::Contains("is a device"));
  t.write("e/empty.txt", "");
  CHECK_THAT(error_of([&] { read_corpus((t.dir / "e").string(), "", 0.1); }), Catch::Contains("has no text"));
}

TEST_CASE("a large file is read in parts cut at line breaks", "[data][text]") {
  TempDir t;
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + "\n";
  const auto d = read_all(t.write("big.txt", text).string(), {.max_document_bytes = 100});
  REQUIRE(d.size() > 5);
  std::string joined;
  for (const auto& x : d) {
    CHECK(x.text.back() == '\n');
    joined += x.text;
  }
  CHECK(joined == text);
  CHECK(d[1].source.ends_with("big.txt#2"));
}

TEST_CASE("validation is held out by document hash, or the tail of each document when that leaves a side empty", "[data][text]") {
  TempDir t;
  for (int i = 0; i < 200; ++i) t.write("docs/" + std::to_string(1000 + i) + ".txt", "document " + std::to_string(i) + "\n");
  const Corpus c = read_corpus((t.dir / "docs").string(), "", 0.1);
  CHECK(c.train.size() + c.validation.size() == 200);
  CHECK(c.validation.size() > 5);
  CHECK(c.validation.size() < 40);
  for (const auto& v : c.validation) CHECK(held_out(v, 0.1));
  for (const auto& v : c.train) CHECK_FALSE(held_out(v, 0.1));
  // One file: its last tenth, cut at a line break.
  std::string one;
  for (int i = 0; i < 100; ++i) one += "line " + std::to_string(i) + "\n";
  const Corpus o = read_corpus(t.write("one.txt", one).string(), "", 0.1);
  REQUIRE(o.train.size() == 1);
  REQUIRE(o.validation.size() == 1);
  CHECK(o.train[0] + o.validation[0] == one);
  CHECK(o.validation[0].starts_with("line 9"));
  // val_data instead.
  const Corpus v = read_corpus(t.write("train.txt", "abc\n").string(), t.write("val.txt", "xyz\n").string(), 0.1);
  CHECK(v.train == std::vector<std::string>{"abc\n"});
  CHECK(v.validation == std::vector<std::string>{"xyz\n"});
  CHECK_THAT(error_of([&] { read_corpus(t.write("short.txt", "no line break").string(), "", 0.1); }), Catch::Contains("too short to hold out"));
  CHECK_THAT(error_of([&] { read_corpus((t.dir / "docs").string(), "", 0.1, {.max_total_bytes = 100}); }), Catch::Contains("ctgrad data tokenize"));
}

TEST_CASE("token shards: written whole, read back, refused when damaged", "[data][shards]") {
  TempDir t;
  ShardHeader f;
  f.vocab_size = 300, f.id_bytes = 2, f.separator = 299, f.vocab_hash = 0x1234;
  ShardWriter w(t.dir, "train", 0, f, 10);
  std::vector<std::int32_t> all;
  for (std::uint64_t d = 0; d < 7; ++d) {
    std::vector<std::int32_t> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(std::int32_t(d * 10 + std::uint64_t(i)));
    all.push_back(299), all.insert(all.end(), ids.begin(), ids.end());
    w.add(ids, d);
  }
  w.finish(7);
  const auto files = shard_files(t.dir, "train");
  REQUIRE(files.size() == 4);  // 10 ids per shard: two documents of 5 each
  CHECK(read_shard_header(files[0]).next_document == 2);
  CHECK(read_shard_header(files[3]).next_document == 7);
  const auto shards = open_shards(t.dir, "train", 0x1234);
  std::vector<std::int32_t> back;
  for (const auto& s : shards) {
    const TokenPiece p{.shard = &s, .size = s.header().tokens};
    std::vector<std::int32_t> ids(p.size);
    p.read(0, ids.size(), ids.data());
    back.insert(back.end(), ids.begin(), ids.end());
  }
  CHECK(back == all);
  CHECK_THAT(error_of([&] { open_shards(t.dir, "train", 0x9999); }), Catch::Contains("another tokenizer"));
  fs::resize_file(files[1], fs::file_size(files[1]) - 1);
  CHECK_THAT(error_of([&] { ShardFile s(files[1]); }), Catch::Contains("truncated or damaged"));
  { std::ofstream(files[2], std::ios::binary | std::ios::in) << "NOTMAGIC"; }
  CHECK_THAT(error_of([&] { ShardFile s(files[2]); }), Catch::Contains("not a token shard"));
  fs::remove(files[0]);
  CHECK_THAT(error_of([&] { shard_files(t.dir, "train"); }), Catch::Contains("train_000000.bin is missing"));
  // A shard being written (its temporary name) is not a shard.
  t.write(".val_000000.bin.tmp.1.0", "partial");
  CHECK(shard_files(t.dir, "val").empty());
  // An id past the header's vocabulary is refused when read, naming where.
  {
    ShardHeader g = f;
    g.vocab_size = 20, g.separator = -1;
    ShardWriter small(t.dir / "small", "train", 0, g, 100);
    fs::create_directories(t.dir / "small");
    const std::vector<std::int32_t> ok{1, 2, 3};
    small.add(ok, 0);
    small.finish(1);
    const auto file = t.dir / "small" / "train_000000.bin";
    { std::fstream(file, std::ios::binary | std::ios::in | std::ios::out).seekp(256 + 2 * 2).write("\x30\x00", 2); }  // position 2: id 48
    ShardFile s(file);
    std::vector<std::int32_t> ids(3);
    CHECK_THAT(error_of([&] { s.read(0, 3, ids.data()); }), Catch::Contains("id 48 at position 2 is outside its vocabulary of 20"));
  }
  // Ids past the vocabulary are refused when written.
  ShardWriter bad(t.dir, "val", 0, f, 10);
  const std::vector<std::int32_t> out_of_range{300};
  CHECK_THAT(error_of([&] { bad.add(out_of_range, 0); }), Catch::Contains("outside the vocabulary"));
}

TEST_CASE("windows lie within one document, and one piece draws the windows it always drew", "[data][batches]") {
  std::vector<std::int32_t> tokens(1000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::int32_t(i);
  // One piece: the same windows as the span constructor's (the main job's data order).
  LmBatches a(tokens, 16, 4, 7), b(std::vector<TokenPiece>{{.ids = tokens.data(), .size = tokens.size()}}, 16, 4, 7);
  a.get(3), b.get(3);
  for (std::uint64_t r = 0; r < 4; ++r)  // window r of batch n starts at bits(key(seed, n, "batc"), r) mod (tokens - context)
    CHECK(a.x()[r * 16] == std::int32_t(ctgrad::random::bits(ctgrad::random::key(7, 3, 0x62617463ull), r) % (1000 - 16)));
  CHECK(std::vector<std::int32_t>(a.x().begin(), a.x().end()) == std::vector<std::int32_t>(b.x().begin(), b.x().end()));
  // Documents of 10, 300, 5 and 685 tokens: a window of 16 + 1 never crosses a start.
  const std::vector<std::size_t> starts{0, 10, 310, 315};
  LmBatches d(document_pieces(tokens, starts), 16, 8, 1);
  for (std::uint64_t n = 0; n < 50; ++n) {
    d.get(n);
    for (int r = 0; r < 8; ++r) {
      const std::int32_t first = d.x()[std::size_t(r * 16)], last = d.y()[std::size_t(r * 16 + 15)];
      CHECK(last == first + 16);
      for (std::size_t s : starts) CHECK_FALSE((std::size_t(first) < s && std::size_t(last) >= s));
    }
  }
  CHECK_THROWS_WITH(LmBatches(document_pieces(tokens, std::vector<std::size_t>{0, 10, 20}), 990, 1, 1), Catch::Contains("the longest document"));
  // Validation: consecutive windows within each piece.
  const auto pieces = document_pieces(tokens, starts);
  const auto w = consecutive_windows(pieces, 16);
  CHECK(w.size() == (299 / 16) + (684 / 16));
  CHECK(consecutive_windows(pieces, 16, 3).size() == 3);
}

TEST_CASE("the character tokenizer's unknown id encodes any text", "[data][tokenizer]") {
  const CharTokenizer plain = CharTokenizer::train("abc"), open = CharTokenizer::train("abc", true);
  CHECK_THROWS_AS(plain.encode("abz"), data_error);
  CHECK(open.vocab_size() == 4);
  CHECK(open.encode("abz") == std::vector<std::int32_t>{0, 1, 3});
  CHECK(open.decode({0, 3}) == "a\xEF\xBF\xBD");
  TempDir t;
  open.save(t.dir / "tok.json");
  CHECK(CharTokenizer::load(t.dir / "tok.json").encode("zzc") == std::vector<std::int32_t>{3, 3, 2});
  plain.save(t.dir / "plain.json");
  CHECK_THROWS_AS(CharTokenizer::load(t.dir / "plain.json").encode("z"), data_error);
}

TEST_CASE("sentence pairs from TSV, JSON Lines and two line-aligned files, a missing side named", "[data][text]") {
  TempDir t;
  const auto pairs = [](const std::string& spec, PairOptions o = {}) { return read_pairs(spec, o); };
  const auto tsv = pairs(t.write("a.tsv", "Hello.\tHallo.\n\nGood night.\tGute Nacht.\r\n").string());
  REQUIRE(tsv.size() == 2);
  CHECK(tsv[1].en == "Good night.");
  CHECK(tsv[1].de == "Gute Nacht.");
  const auto jl = pairs(t.write("b.jsonl", "{\"en\": \"Yes.\", \"de\": \"Ja.\"}\n{\"translation\": {\"en\": \"No.\", \"de\": \"Nein.\"}}\n").string());
  REQUIRE(jl.size() == 2);
  CHECK(jl[1].de == "Nein.");
  CHECK(pairs(t.write("c.jsonl", "{\"src\": \"x\", \"tgt\": \"y\"}\n").string(), {.source_field = "src", .target_field = "tgt"})[0].de == "y");
  const auto two = pairs("pairs:" + t.write("en.txt", "one\ntwo\n\nfour\n").string() + "," + t.write("de.txt", "eins\nzwei\n\nvier\n").string());
  REQUIRE(two.size() == 3);
  CHECK(two[2].en == "four");
  CHECK(two[2].de == "vier");
  CHECK(pairs((t.dir / "*.tsv").string()).size() == 2);
  const auto bad = [&](const std::string& spec) { return error_of([&] { read_pairs(spec); }); };
  CHECK_THAT(bad(t.write("d.tsv", "ok\tgut\nno tab here\n").string()), Catch::Contains("d.tsv: line 2 has no tab"));
  CHECK_THAT(bad(t.write("e.tsv", "ok\t\n").string()), Catch::Contains("line 1: its target is empty (a missing side)"));
  CHECK_THAT(bad(t.write("f.tsv", "a\tb\tc\n").string()), Catch::Contains("more than two tab-separated fields"));
  CHECK_THAT(bad(t.write("g.jsonl", "{\"en\": \"x\"}\n").string()), Catch::Contains("line 1 has no field \"de\""));
  CHECK_THAT(bad("pairs:" + t.write("l.txt", "a\nb\n").string() + "," + t.write("r.txt", "x\n\n").string()), Catch::Contains("line 2 of"));
  CHECK_THAT(bad("pairs:" + t.write("l2.txt", "a\nb\nc\n").string() + "," + t.write("r2.txt", "x\ny\n").string()), Catch::Contains("has 2 lines"));
  CHECK_THAT(bad("pairs:" + (t.dir / "en.txt").string()), Catch::Contains("names two files"));
  CHECK_THAT(bad(t.dir.string()), Catch::Contains("is a folder"));
  CHECK_THAT(bad(t.write("h.tsv", "\n\n").string()), Catch::Contains("holds no pairs"));
}

TEST_CASE("labelled text from TSV, CSV and JSON Lines, a missing label or column named", "[data][text]") {
  TempDir t;
  const auto tsv = read_labelled(t.write("a.tsv", "text\tlabel\ngood film\tpos\nwith\ta tab\tneg\n").string());
  REQUIRE(tsv.size() == 2);  // the header skipped; the label is the last field
  CHECK(tsv[1].text == "with\ta tab");
  CHECK(tsv[1].label == "neg");
  const auto csv = read_labelled(t.write("b.csv", "id,label,text\n1,pos,\"a \"\"quoted\"\", comma\"\n2,neg,\"two\nlines\"\n").string());
  REQUIRE(csv.size() == 2);
  CHECK(csv[0].text == "a \"quoted\", comma");
  CHECK(csv[1].text == "two\nlines");
  CHECK(csv[1].label == "neg");
  const auto jl = read_labelled(t.write("c.jsonl", "{\"body\": \"x\", \"stars\": 5}\n").string(), {.text_field = "body", .label_field = "stars"});
  CHECK(jl[0].label == "5");
  const auto bad = [&](const std::string& name, const std::string& bytes) { return error_of([&] { read_labelled(t.write(name, bytes).string()); }); };
  CHECK_THAT(bad("d.tsv", "no tab\n"), Catch::Contains("d.tsv: line 1 has no tab"));
  CHECK_THAT(bad("e.tsv", "text\t\n"), Catch::Contains("line 1: its label is empty"));
  CHECK_THAT(bad("f.csv", "words,label\nx,y\n"), Catch::Contains("f.csv: line 1: the header has no column \"text\""));
  CHECK_THAT(bad("g.csv", "text,label\nonly text\n"), Catch::Contains("g.csv: line 2 has 1 fields"));
  CHECK_THAT(bad("h.csv", "text,label\n\"open quote,x\n"), Catch::Contains("ends inside a quoted field"));
  CHECK_THAT(bad("i.csv", "text,label\na\"b,x\n"), Catch::Contains("line 2 is not CSV"));
  CHECK_THAT(bad("j.jsonl", "{\"text\": \"x\", \"label\": 1.5}\n"), Catch::Contains("neither a string nor an integer"));
  CHECK_THAT(bad("k.tsv", "\n\n"), Catch::Contains("holds no labelled text"));
}
