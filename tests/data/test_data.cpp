// Data from Debian packages, tokenizers and batches.
#include <catch2/catch.hpp>

#include "../scratch.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <csignal>
#include <numeric>
#include <cstring>
#include <string_view>
#include <unordered_set>
#include <fstream>
#include <filesystem>
#include <iterator>
#include <optional>

#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/cache.hpp>
#include <ctgrad/data/idx.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>

using namespace ctgrad::data;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {
using ctgrad::testing::scratch;
const std::string& kjv() {
  static const std::string text = kjv_text();
  return text;
}
}  // namespace

TEST_CASE("the KJV text, one verse per line, and a deterministic split", "[data][text]") {
  const std::string& t = kjv();
  CHECK(std::count(t.begin(), t.end(), '\n') == 31102);
  CHECK(t.rfind("In the beginning God created the heaven and the earth.\n", 0) == 0);
  CHECK(t.find("Amen.\n") != std::string::npos);
  TextSplit s = split_text(t, 0.9);
  CHECK(s.train + s.validation == t);
  CHECK(double(s.train.size()) / double(t.size()) == Approx(0.9).margin(0.001));
  CHECK(s.train.back() == '\n');
}

TEST_CASE("character tokenizer: round trip, unknown characters, ids out of range, save and load", "[data][tokenizer]") {
  CharTokenizer tok = CharTokenizer::train(kjv());
  CHECK(tok.vocab_size() > 60);
  CHECK(tok.vocab_size() < 80);
  const std::string verse = "And God said, Let there be light: and there was light.";
  CHECK(tok.decode(tok.encode(verse)) == verse);
  CHECK_THROWS_WITH(tok.encode("light ~ dark"), Contains("character '~' (byte 126) at position 6 is not in the vocabulary"));
  CHECK_THROWS_WITH(tok.decode({1, 2, 500}), Contains("token id 500 at position 2 is outside the vocabulary"));
  const fs::path p = scratch("chars.json");
  tok.save(p);
  CharTokenizer back = CharTokenizer::load(p);
  CHECK(back.encode(verse) == tok.encode(verse));
  std::ofstream(scratch("bad.json")) << "{\"chars\": [65, 65]}";
  CHECK_THROWS_WITH(CharTokenizer::load(scratch("bad.json")), Contains("is not a character vocabulary"));
}

TEST_CASE("SentencePiece BPE trained on the training split, saved and loaded back", "[data][tokenizer]") {
  const std::string text = kjv().substr(0, 400000);
  const fs::path prefix = scratch("spm");
  SentencePieceTokenizer tok = SentencePieceTokenizer::train(text, prefix, {.vocab_size = 800, .model_type = "bpe"});
  CHECK(tok.vocab_size() == 800);
  const std::string verse = "And God said, Let there be light: and there was light.";
  auto ids = tok.encode(verse);
  CHECK(ids.size() < verse.size() / 2);  // pieces, not characters
  CHECK(tok.decode(ids) == verse);
  tok.save(scratch("copy.model"));
  SentencePieceTokenizer back = SentencePieceTokenizer::load(scratch("copy.model"));
  CHECK(back.encode(verse) == ids);
  CHECK_THROWS_WITH(SentencePieceTokenizer::load(scratch("nothing.model")), Contains("cannot load SentencePiece model"));
}

TEST_CASE("data cache: entries by key, misses on any changed field, a damaged entry removed and missed", "[data][cache]") {
  const fs::path dir = scratch("cache_entries");
  fs::remove_all(dir);
  const DataCache cache(dir);
  const CacheKey a = CacheKey("test 1").add("ab").add("c").add(std::int64_t(7));
  CHECK(a.hex().size() == 32);
  CHECK(a.hex() == CacheKey("test 1").add("ab").add("c").add(std::int64_t(7)).hex());
  CHECK(a.hex() != CacheKey("test 1").add("a").add("bc").add(std::int64_t(7)).hex());  // fields keep their bounds
  CHECK(a.hex() != CacheKey("test 1").add("ab").add("c").add(std::int64_t(8)).hex());
  CHECK(a.hex() != CacheKey("test 2").add("ab").add("c").add(std::int64_t(7)).hex());
  const std::string big(100000, 'x');  // long fields are hashed in place
  std::string big2 = big;
  big2[54321] = 'y';
  CHECK(CacheKey("t").add(big).hex() != CacheKey("t").add(big2).hex());
  CHECK(CacheKey("t").add(big).hex() == CacheKey("t").add(std::string(100000, 'x')).hex());

  CHECK_FALSE(cache.read(a, "blob"));
  const std::string payload = std::string("bytes\0with a zero and ") + big;
  cache.write(a, "blob", payload);
  REQUIRE(fs::exists(cache.file(a, "blob")));
  CHECK(cache.read(a, "blob") == payload);
  CHECK_FALSE(cache.read(a, "other kind"));
  // A flipped byte: the entry is not used, and is removed.
  {
    std::fstream f(cache.file(a, "blob"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('?');
  }
  CHECK_FALSE(cache.read(a, "blob"));
  CHECK_FALSE(fs::exists(cache.file(a, "blob")));
  // Truncated to less than its header.
  cache.write(a, "blob", payload);
  fs::resize_file(cache.file(a, "blob"), 10);
  CHECK_FALSE(cache.read(a, "blob"));
  // No folder: nothing kept, every lookup a miss.
  const DataCache none;
  CHECK_FALSE(none.enabled());
  none.write(a, "blob", payload);
  CHECK_FALSE(none.read(a, "blob"));
  // A folder that cannot be made: a warning, and the caller goes on.
  const DataCache blocked(scratch("cache_entries") / "blob-is-a-file" / "sub");
  { std::ofstream(scratch("cache_entries") / "blob-is-a-file") << "x"; }
  CHECK_NOTHROW(blocked.write(a, "blob", payload));
  CHECK_FALSE(blocked.read(a, "blob"));
}

TEST_CASE("data cache from the environment: CTGRAD_CACHE, off, XDG_CACHE_HOME, HOME", "[data][cache]") {
  struct Env {
    std::string name;
    std::optional<std::string> was;
    explicit Env(std::string n) : name(std::move(n)) {
      if (const char* v = std::getenv(name.c_str())) was = v;
    }
    ~Env() { was ? setenv(name.c_str(), was->c_str(), 1) : unsetenv(name.c_str()); }
  } cache("CTGRAD_CACHE"), xdg("XDG_CACHE_HOME"), home("HOME");
  setenv("CTGRAD_CACHE", "/tmp/some cache", 1);
  CHECK(DataCache::from_environment().dir() == "/tmp/some cache");
  setenv("CTGRAD_CACHE", "off", 1);
  CHECK_FALSE(DataCache::from_environment().enabled());
  setenv("CTGRAD_CACHE", "", 1);
  CHECK_FALSE(DataCache::from_environment().enabled());
  unsetenv("CTGRAD_CACHE");
  setenv("XDG_CACHE_HOME", "/x", 1);
  CHECK(DataCache::from_environment().dir() == "/x/ctgrad");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  CHECK(DataCache::from_environment().dir() == "/home/u/.cache/ctgrad");
}

TEST_CASE("SentencePiece with the data cache: the same model and ids as without it, a miss on any changed option", "[data][tokenizer][cache]") {
  const fs::path dir = scratch("cache_spm");
  fs::remove_all(dir);
  const DataCache cache(dir);
  const std::string text = kjv().substr(0, 300000);
  const SentencePieceOptions o{.vocab_size = 600, .model_type = "bpe", .seed = 3};
  auto bytes = [](const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const SentencePieceTokenizer plain = SentencePieceTokenizer::train(text, scratch("spm_plain"), o);
  const SentencePieceTokenizer first = SentencePieceTokenizer::train(text, scratch("spm_first"), o, cache);  // a miss: trains, keeps it
  const auto entries = [&] { return std::distance(fs::directory_iterator(dir), fs::directory_iterator()); };
  CHECK(entries() == 1);
  const SentencePieceTokenizer again = SentencePieceTokenizer::train(text, scratch("spm_again"), o, cache);  // a hit
  CHECK(entries() == 1);
  // The model's bytes depend on the text and the options alone: trained or kept, the same file.
  CHECK(bytes(scratch("spm_again.model")) == bytes(scratch("spm_plain.model")));
  CHECK(bytes(scratch("spm_first.model")) == bytes(scratch("spm_plain.model")));
  // Any other option, the seed or the text: trained anew, one more entry each.
  const std::string small = text.substr(0, 100000);
  std::vector<SentencePieceOptions> others(6, SentencePieceOptions{.vocab_size = 300, .model_type = "bpe", .seed = 3});
  others[1].vocab_size = 301, others[2].seed = 4, others[3].user_defined_symbols = {"[X]"}, others[4].input_sentence_size = 2000;
  others[5].unk_piece = "<u>";
  for (std::size_t i = 0; i < others.size(); ++i) {
    SentencePieceTokenizer::train(small, scratch("spm_other"), others[i], cache);
    CHECK(entries() == std::ptrdiff_t(2 + i));
  }
  SentencePieceTokenizer::train(small.substr(0, 90000), scratch("spm_other"), others[0], cache);
  CHECK(entries() == 8);

  // encode_all: what encode gives text by text, in order; cached, then read back the same.
  std::vector<std::string> verses;
  for (std::size_t pos = 0; verses.size() < 3000;) {
    const std::size_t end = text.find('\n', pos);
    verses.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  verses.push_back("");
  std::vector<std::vector<std::int32_t>> want;
  for (const auto& v : verses) want.push_back(plain.encode(v));
  CHECK(plain.encode_all(verses) == want);  // no cache: in parallel, same order
  CHECK(again.encode_all(verses, cache) == want);
  CHECK(entries() == 9);
  fs::path ids_entry;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("sentencepiece-ids", 0) == 0) ids_entry = e.path();
  const std::string kept = bytes(ids_entry);
  const auto written = fs::last_write_time(ids_entry);
  CHECK(again.encode_all(verses, cache) == want);  // a hit: the entry read, not written again
  CHECK(first.encode_all(verses, cache) == want);  // the same model's bytes: the same entry
  CHECK(entries() == 9);
  CHECK(fs::last_write_time(ids_entry) == written);
  // A damaged entry is not used: one id changed to another valid id (only the entry's hash can
  // tell), and the ids are made again and the entry written whole again.
  {
    const std::size_t header = 15 + 16, first_id = header + 8 + 8 * (verses.size() + 1);
    std::fstream f(ids_entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(first_id));
    const char c = char(f.get());
    f.seekp(std::streamoff(first_id));
    f.put(char(c ^ 1));
  }
  CHECK(bytes(ids_entry) != kept);
  CHECK(again.encode_all(verses, cache) == want);
  CHECK(bytes(ids_entry) == kept);
  verses.back() = "And";
  CHECK(again.encode_all(verses, cache).back() == plain.encode("And"));
  CHECK(entries() == 10);
}

TEST_CASE("language-model batches: y is x shifted by one, batch n is the same whenever drawn", "[data][batches]") {
  std::vector<std::int32_t> tokens(1000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::int32_t(i);
  LmBatches a(tokens, 16, 4, 7), b(tokens, 16, 4, 7);
  a.get(3);
  for (std::size_t i = 0; i < a.x().size(); ++i) CHECK(a.y()[i] == a.x()[i] + 1);
  b.get(5);
  b.get(3);
  CHECK(std::equal(a.x().begin(), a.x().end(), b.x().begin()));
  a.get(4);
  CHECK(!std::equal(a.x().begin(), a.x().end(), b.x().begin()));
  CHECK_THROWS(LmBatches(std::span<const std::int32_t>(tokens.data(), 10), 16, 4, 7));
}

TEST_CASE("Fashion-MNIST from the Debian package", "[data][idx]") {
  ImageSet train = fashion_mnist("train"), test = fashion_mnist("test");
  CHECK(train.count == 60000);
  CHECK(test.count == 10000);
  CHECK(train.rows == 28);
  CHECK(train.cols == 28);
  CHECK(train.pixels.size() == std::size_t(60000 * 28 * 28));
  std::vector<int> per_class(10, 0);
  for (auto l : test.labels) ++per_class[std::size_t(l)];
  for (int c : per_class) CHECK(c == 1000);
  CHECK_THROWS_WITH(fashion_mnist("train", "/nonexistent"), Contains("needs the Debian package dataset-fashion-mnist"));
  CHECK_THROWS_WITH(fashion_mnist("dev"), Contains("split must be train or test"));
}

TEST_CASE("truncated or malformed IDX files give a clear error naming the file", "[data][idx][errors]") {
  auto write_gz = [](const fs::path& p, const std::vector<unsigned char>& bytes) {
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  };
  const fs::path p = scratch("x-idx1-ubyte.gz");
  write_gz(p, {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3});  // promises 5 bytes, holds 3
  CHECK_THROWS_WITH(read_idx_gz(p), Contains(p.string()) && Contains("holds 3 data bytes, its header promises 5 (truncated)"));
  write_gz(p, {0, 0, 13, 1, 0, 0, 0, 1, 0, 0, 0, 0});  // float IDX
  CHECK_THROWS_WITH(read_idx_gz(p), Contains("not an unsigned-byte IDX file"));
  std::ofstream(p, std::ios::binary) << "this is not gzip at all, just text";
  CHECK_THROWS(read_idx_gz(p));
  CHECK_THROWS_WITH(read_idx_gz(scratch("missing.gz")), Contains("no such file"));
}

#include <ctgrad/data/pairs.hpp>

TEST_CASE("EN-DE sentence pairs from the Ding dictionary, split and batched", "[data][pairs]") {
  const auto pairs = ding_sentence_pairs();
  CHECK(pairs.size() > 10000);
  CHECK(pairs.size() < 30000);
  bool found = false;
  for (const auto& p : pairs) found |= p.en == "I enjoyed my supper." && p.de == "Das Abendessen hat mir geschmeckt.";
  CHECK(found);
  for (const auto& p : pairs) {
    REQUIRE(p.en.find('{') == std::string::npos);
    REQUIRE(p.de.find('[') == std::string::npos);
  }
  const PairSplit a = split_pairs(pairs), b = split_pairs(pairs);
  CHECK(a.train.size() + a.validation.size() + a.test.size() == pairs.size());
  CHECK(double(a.test.size()) / double(pairs.size()) == Approx(0.05).margin(0.01));
  CHECK(a.test.front().en == b.test.front().en);
  std::unordered_set<std::string_view> train_en;
  for (const auto& p : a.train) train_en.insert(p.en);
  for (const auto& p : a.test) CHECK(train_en.count(p.en) == 0);
  CHECK_THROWS_WITH(ding_sentence_pairs("/nonexistent"), Contains("need the Debian package trans-de-en"));
}

TEST_CASE("Ding pairs split by dictionary entry: nothing of a held-out entry trains", "[data][pairs]") {
  const auto pairs = ding_pairs();
  CHECK(pairs.size() > 300000);
  std::size_t sentences = 0;
  for (const auto& p : pairs) sentences += p.sentence;
  CHECK(sentences > 15000);
  const EntrySplit s = split_by_entry(pairs);
  INFO(s.train_sentences.size() << " train sentences, " << s.train_phrases.size() << " phrases, " << s.validation.size() << " validation, "
                                << s.test.size() << " test, " << s.dropped << " dropped");
  CHECK(double(s.test.size()) / double(sentences) == Approx(0.05).margin(0.015));
  CHECK(s.train_phrases.size() > 200000);
  // The leakage check: no test or validation sentence, and no side of any pair of a held-out
  // entry (its phrases), occurs in the training pairs.
  std::unordered_set<std::string_view> train_en, train_de;  // views of s
  for (const auto* part : {&s.train_sentences, &s.train_phrases})
    for (const auto& p : *part) train_en.insert(p.en), train_de.insert(p.de);
  const std::unordered_set<std::int32_t> held(s.held_out_entries.begin(), s.held_out_entries.end());
  std::unordered_set<std::string_view> held_en;  // views of pairs
  for (const auto& p : pairs)
    if (held.count(p.entry)) held_en.insert(p.pair.en);
  for (const auto* part : {&s.test, &s.validation})
    for (const auto& p : *part) REQUIRE(held_en.count(p.en));  // every held-out sentence is of a held-out line
  std::size_t leaks = 0, held_pairs = 0;
  for (const auto& p : pairs)
    if (held.count(p.entry)) ++held_pairs, leaks += train_en.count(p.pair.en) + train_de.count(p.pair.de);
  CHECK(held_pairs > s.test.size() + s.validation.size());
  CHECK(leaks == 0);
  // Stable: the same split every time.
  const EntrySplit again = split_by_entry(pairs);
  CHECK(again.test.front().en == s.test.front().en);
  CHECK(again.train_phrases.size() == s.train_phrases.size());
}

TEST_CASE("seeded shuffling and padded batches with valid lengths", "[data][batches]") {
  auto p = shuffled(100, 7, 0), q = shuffled(100, 7, 0), r = shuffled(100, 7, 1);
  CHECK(p == q);
  CHECK(p != r);
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 100; ++i) CHECK(sorted[std::size_t(i)] == i);
  std::vector<std::vector<std::int32_t>> seqs = {{5, 6, 7}, {8}, {1, 2, 3, 4, 5, 6}};
  PaddedBatch b = pad(seqs, 0, 4);
  CHECK(b.length == 4);
  CHECK(b.lengths == std::vector<std::int32_t>{3, 1, 4});
  CHECK(b.ids == std::vector<std::int32_t>{5, 6, 7, 0, 8, 0, 0, 0, 1, 2, 3, 4});
}

TEST_CASE("Jane Austen's novels through janeaustenr", "[data][text]") {
  const std::string t = austen_text();
  CHECK(t.size() > 3500000);
  CHECK(t.find("It is a truth universally acknowledged") != std::string::npos);  // Pride and Prejudice
  CHECK(t.find("Emma Woodhouse, handsome, clever, and rich") != std::string::npos);
}

TEST_CASE("Jane Austen's novels through the data cache: the same books, R's output kept", "[data][text][cache]") {
  const fs::path dir = scratch("cache_austen");
  fs::remove_all(dir);
  const DataCache cache(dir);
  const auto plain = austen_novels();
  REQUIRE(plain.size() == 6);
  const auto first = austen_novels(cache);  // runs R, keeps its output
  REQUIRE(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  const fs::path entry = fs::directory_iterator(dir)->path();
  const auto written = fs::last_write_time(entry);
  const auto again = austen_novels(cache);  // from the cache: the entry read, not written again
  CHECK(fs::last_write_time(entry) == written);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    CHECK(first[i].title == plain[i].title);
    CHECK(first[i].text == plain[i].text);
    CHECK(again[i].text == plain[i].text);
  }
}

// A full disk (here a file-size limit, whose signal is ignored so that write() fails with EFBIG)
// while a tokenizer is saved over an existing one: an error, and the old file is whole. (The old
// writer renamed an empty file over it.)
TEST_CASE("a tokenizer save that fails leaves the saved tokenizer whole", "[data][tokenizer][errors]") {
  const auto p = scratch("full_disk_tokenizer.json");
  CharTokenizer::train("abc").save(p);
  std::ifstream in(p);
  const std::string before{std::istreambuf_iterator<char>(in), {}};
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 4;
    try {
      std::signal(SIGXFSZ, SIG_IGN);
      const rlimit limit{8, 8};
      ::setrlimit(RLIMIT_FSIZE, &limit);
      CharTokenizer::train(kjv()).save(p);  // a longer file than 8 bytes
    } catch (const data_error&) {
      code = 3;  // refused, as it must be
    } catch (...) {
      code = 5;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  std::ifstream again(p);
  CHECK(std::string{std::istreambuf_iterator<char>(again), {}} == before);
  for (const auto& e : fs::directory_iterator(p.parent_path())) CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

#include <ctgrad/data/en_de.hpp>
#include <ctgrad/data/gettext.hpp>

namespace {
// A .mo catalogue of these messages (the header first, as msgfmt writes it), little-endian.
std::string make_mo(const std::vector<std::pair<std::string, std::string>>& msgs) {
  const std::uint32_t n = std::uint32_t(msgs.size()), ids = 28, strs = 28 + 8 * n;
  std::string head(28 + 16 * n, '\0'), body;
  auto put = [&](std::size_t at, std::uint32_t v) { std::memcpy(head.data() + at, &v, 4); };
  put(0, 0x950412de), put(4, 0), put(8, n), put(12, ids), put(16, strs), put(20, 0), put(24, std::uint32_t(head.size()));
  for (std::uint32_t i = 0; i < n; ++i)
    for (int side = 0; side < 2; ++side) {
      const std::string& s = side ? msgs[i].second : msgs[i].first;
      put((side ? strs : ids) + 8 * i, std::uint32_t(s.size()));
      put((side ? strs : ids) + 8 * i + 4, std::uint32_t(head.size() + body.size()));
      body += s;
      body += '\0';
    }
  return head + body;
}
}  // namespace

TEST_CASE("gettext .mo catalogues: messages read, markup dropped, damage named", "[data][gettext]") {
  const fs::path dir = scratch("mo");
  fs::create_directories(dir);
  const std::string mo = make_mo({{"", "Content-Type: text/plain; charset=UTF-8\n"},
                                  {"Onward, my friends!", "Vorwärts, meine Freunde!"},
                                  {"speaker\x04<i>Run</i>\n away!", "<i>Lauft</i>\n weg!"},
                                  {std::string("one orc\0%d orcs", 15), std::string("ein Ork\0%d Orks", 15)},
                                  {"Hello $name.", "Hallo $name."},
                                  {"Untranslated.", ""},
                                  {"Onward, my friends!", "Vorwärts, meine Freunde!"}});
  std::ofstream(dir / "a.mo", std::ios::binary) << mo;
  const auto msgs = read_mo(dir / "a.mo").messages;
  REQUIRE(msgs.size() == 6);  // the header is left out
  CHECK(msgs[0].id == "Onward, my friends!");
  CHECK(msgs[0].str == "Vorwärts, meine Freunde!");
  const auto pairs = wesnoth_pairs(dir);
  REQUIRE(pairs.size() == 3);
  CHECK(pairs[1].en == "Run away!");  // context, tags and the line break gone
  CHECK(pairs[1].de == "Lauft weg!");
  CHECK(pairs[2].en == "one orc");    // a plural's singular
  std::ofstream(dir / "b.mo", std::ios::binary) << mo.substr(0, 40);
  CHECK_THROWS_WITH(read_mo(dir / "b.mo"), Contains("b.mo") && Contains("run past the end"));
  std::ofstream(dir / "b.mo", std::ios::binary) << "not a catalogue at all, some text";
  CHECK_THROWS_WITH(read_mo(dir / "b.mo"), Contains("wrong magic number"));
  CHECK_THROWS_WITH(wesnoth_pairs(scratch("none")), Contains("scripts/setup_wesnoth.sh"));
  fs::remove(dir / "b.mo");
  REQUIRE(::mkfifo((dir / "b.mo").c_str(), 0644) == 0);  // a FIFO among the catalogues: refused, not waited on
  CHECK_THROWS_WITH(wesnoth_pairs(dir), Contains("b.mo") && Contains("not a regular file"));
}

TEST_CASE("the EN-DE corpus of the dictionary and the game: nothing of a held-out line trains", "[data][pairs][gettext]") {
  const EnDeCorpus c = en_de_corpus("ding+wesnoth");  // scripts/setup.sh --tests installs both sources
  const std::vector<DingPair> pairs = ding_pairs();
  const EntrySplit dict = split_by_entry(pairs);
  INFO(c.train_sentences.size() << " train sentences (dictionary and game), " << c.train_phrases.size() << " phrases, " << c.other_tests.at(0).pairs.size()
                                << " game test pairs, " << c.dropped << " game pairs dropped");
  CHECK(c.train_sentences.size() > dict.train_sentences.size() + 8000);  // the game's dialogue trains
  CHECK(c.test.size() == dict.test.size());                                // the dictionary's test split is unchanged
  REQUIRE(c.other_tests.size() == 1);
  CHECK(c.other_tests[0].name == "Wesnoth test");
  CHECK(c.other_tests[0].pairs.size() > 400);
  CHECK(c.dropped > 0);  // 60 when written: the sources do share sides, so the filter is exercised
  std::unordered_set<std::string_view> train_en, train_de;  // views of c
  for (const auto* part : {&c.train_sentences, &c.train_phrases})
    for (const auto& p : *part) train_en.insert(p.en), train_de.insert(p.de);
  // No side of any pair of a held-out dictionary line (its sentences and its phrases) trains, from
  // either source; no test sentence of the game trains.
  const std::unordered_set<std::int32_t> held(dict.held_out_entries.begin(), dict.held_out_entries.end());
  std::size_t leaks = 0, held_pairs = 0;
  for (const auto& p : pairs)
    if (held.count(p.entry)) ++held_pairs, leaks += train_en.count(p.pair.en) + train_de.count(p.pair.de);
  CHECK(held_pairs > c.test.size() + c.validation.size());
  CHECK(leaks == 0);
  for (const auto* part : {&c.test, &c.validation, &c.other_tests[0].pairs})
    for (const auto& p : *part) leaks += train_en.count(p.en) + train_de.count(p.de);
  CHECK(leaks == 0);
  CHECK_THROWS_WITH(en_de_corpus("wmt"), Catch::Matchers::Contains("data wmt: no such file or folder"));  // not a source: a user's file
}

// Debian's corpus mixed with the dictionary's and the game's: no side of a held-out pair of any
// source trains (the corpora are fixtures here; the real one is `ctgrad data ende`'s download).
TEST_CASE("the EN-DE corpus from Debian with the dictionary and the game: nothing held out trains", "[data][pairs]") {
  EnDeCorpus base;
  base.train_sentences = {{"The cat sleeps on the mat.", "Die Katze schläft auf der Matte."}, {"Open the file now.", "Öffne jetzt die Datei."}};
  base.train_phrases = {{"file", "Datei"}, {"save as", "speichern unter"}};
  base.validation = {{"Where is the station?", "Wo ist der Bahnhof?"}};
  base.test = {{"I like green tea.", "Ich mag grünen Tee."}};
  base.other_tests = {{"Wesnoth test", {{"Attack the orcs!", "Greift die Orks an!"}}}};
  base.held_sides = {"tea", "Tee", "I like green tea.", "Ich mag grünen Tee."};  // a held-out line's phrase and sentence
  DebianSplits deb;
  deb.train = {{"Save the document before you quit.", "Speichern Sie das Dokument, bevor Sie beenden."},
               {"Save as", "Speichern unter"},
               {"tea", "Teesorte"},                                     // a held-out dictionary phrase's English side
               {"Attack the orcs!", "Greifen Sie die Orks an!"},        // the game's test pair's English side
               {"Open the file now.", "Datei jetzt öffnen."},            // the dictionary's training sentence: fine
               {"The printer is out of paper.", "Dem Drucker fehlt Papier."},
               {"Print", "Drucken"}};
  deb.validation = {{"Close all windows.", "Schließe alle Fenster."}};
  deb.test = {{"The file could not be saved.", "Die Datei konnte nicht gespeichert werden."}, {"save as", "Speichern als"}};
  for (bool train_base : {false, true}) {
    const EnDeCorpus c = with_debian(base, deb, train_base);
    CAPTURE(train_base);
    CHECK(c.validation.size() == 1);
    CHECK(c.test.size() == 2);
    REQUIRE(c.other_tests.size() == 2);
    CHECK(c.other_tests[0].name == "Ding test");
    CHECK(c.other_tests[0].pairs.size() == 1);
    CHECK(c.other_tests[1].name == "Wesnoth test");
    std::unordered_set<std::string> train;
    for (const auto* part : {&c.train_sentences, &c.train_phrases})
      for (const auto& p : *part) train.insert(p.en), train.insert(p.de);
    std::size_t leaks = 0;
    for (const std::vector<SentencePair>* part : {&c.validation, &c.test, &std::as_const(base).validation, &c.other_tests[0].pairs, &c.other_tests[1].pairs})
      for (const auto& p : *part) leaks += train.count(p.en) + train.count(p.de);
    for (const auto& s : base.held_sides) leaks += train.count(s);
    CHECK(leaks == 0);
    // Debian's sentences are sentences, its labels phrases; the dictionary's keep their kind.
    CHECK(c.train_sentences.size() == (train_base ? 5u : 3u));
    CHECK(c.train_phrases.size() == (train_base ? 3u : 2u));  // "Save as", "Print", and "file"; base's "save as" is a Debian test side
    CHECK(c.dropped == (train_base ? 3u : 2u));
  }
  CHECK(sentence_like("The file could not be saved."));
  CHECK_FALSE(sentence_like("Save as..."));  // two words
  CHECK_FALSE(sentence_like("Save the document before you quit"));
}

TEST_CASE("the EN-DE corpus from Debian, read as ctgrad data ende writes it", "[data][pairs]") {
  const fs::path dir = scratch("ende_corpus");
  fs::create_directories(dir);
  std::ofstream(dir / "train.tsv") << "Save as\tSpeichern unter\tgettext:a\nThe file is gone.\tDie Datei ist weg.\tgettext:a\n";
  std::ofstream(dir / "validation.tsv") << "Close\tSchließen\tddtp:b\n";
  CHECK_THROWS_WITH(read_debian_corpus(dir), Contains("test.tsv is missing") && Contains("ctgrad data ende"));
  std::ofstream(dir / "test.tsv") << "Print\tDrucken\tlibreoffice:c\n";
  const DebianSplits d = read_debian_corpus(dir);
  REQUIRE(d.train.size() == 2);
  CHECK(d.train[1].de == "Die Datei ist weg.");
  CHECK(d.test.at(0).en == "Print");
  std::ofstream(dir / "test.tsv") << "Print Drucken\n";
  CHECK_THROWS_WITH(read_debian_corpus(dir), Contains("test.tsv line 1") && Contains("English TAB German"));
  // A side that is not UTF-8 (a catalogue read as if it were) is refused, naming file, line and byte.
  std::ofstream(dir / "test.tsv") << "Print\tDrucken\tlibreoffice:c\nInvalid argument\tUng\xfcltiges Argument\tgettext:a2ps/a2ps\n";
  CHECK_THROWS_WITH(read_debian_corpus(dir), Contains("test.tsv line 2 is not UTF-8 text (byte 0xfc at column 21)"));
}

TEST_CASE("the Wesnoth EN-DE dialogue, as the set-up installs it", "[data][gettext]") {
  const auto pairs = wesnoth_pairs();  // scripts/setup.sh runs scripts/setup_wesnoth.sh
  CHECK(pairs.size() > 9000);
  double words = 0;
  for (const auto& p : pairs) {
    words += double(std::count(p.en.begin(), p.en.end(), ' ') + 1);
    REQUIRE(p.en.find('<') == std::string::npos);
    REQUIRE(p.de.find('$') == std::string::npos);
  }
  CHECK(words / double(pairs.size()) > 10);
}

TEST_CASE("fixed_subset keeps the same n items for every run, moved, none twice", "[data]") {
  std::vector<int> all(1000);
  std::iota(all.begin(), all.end(), 0);
  auto a = all, b = all, c = all;
  ctgrad::data::fixed_subset(a, 100, "budget");
  ctgrad::data::fixed_subset(b, 100, "budget");
  ctgrad::data::fixed_subset(c, 100, "another budget");
  REQUIRE(a.size() == 100);
  CHECK(a == b);  // keyed by the name alone
  CHECK(a != c);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  CHECK(sorted.front() >= 0);
  CHECK(sorted.back() < 1000);
  CHECK(sorted != std::vector<int>(all.begin(), all.begin() + 100));  // not simply the first 100
  auto d = all;
  ctgrad::data::fixed_subset(d, 5000, "budget");  // a budget above the count keeps everything
  CHECK(d == all);
}
