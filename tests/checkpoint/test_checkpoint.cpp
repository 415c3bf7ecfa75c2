// Checkpoints: round trip, bad files, atomic writes under a crash, bit-exact resume.
#include <catch2/catch.hpp>

#include "../scratch.hpp"

#include <signal.h>
#include <sys/file.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>
#include <vector>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/optim/optimizers.hpp>

using namespace ctgrad;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {
using ctgrad::testing::scratch;
void truncate_to(const fs::path& p, std::uintmax_t size) { fs::resize_file(p, size); }
}  // namespace

constexpr auto mlp = [] {
  Builder g;
  Value x = g.input("x", {Batch, 6});
  Value y = g.input("y", {Batch}, {.dtype = DType::index});
  Value h = dropout(relu(layers::linear(g.scope("fc1"), x, 16)), 0.2);  // dropout: the RNG step matters
  g.loss(cross_entropy(layers::linear(g.scope("fc2"), h, 3), y));
  return g;
};
static constexpr auto MLP = freeze<mlp>();
constexpr auto other = [] {
  Builder g;
  Value x = g.input("x", {Batch, 6});
  g.loss(sum(layers::linear(g.scope("fc1"), x, 8)));
  return g;
};
static constexpr auto OTHER = freeze<other>();

TEST_CASE("safetensors round trip with metadata", "[checkpoint]") {
  std::vector<float> a = {1.5f, -2, 3, 4, 5, 6};
  std::vector<std::int32_t> b = {7, -8};
  const fs::path p = scratch("roundtrip.safetensors");
  std::vector<checkpoint::TensorView> t = {checkpoint::view_of<float>("a", a, {2, 3}),
                                           checkpoint::view_of<std::int32_t>("b", b, {2})};
  checkpoint::save(p, t, {{"config", "{\"d\": 3}"}});
  checkpoint::File f(p);
  CHECK(f.metadata().at("config") == "{\"d\": 3}");
  std::vector<float> a2(6);
  std::vector<std::int64_t> shape = {2, 3};
  f.read<float>("a", a2, shape);
  CHECK(a2 == a);
  CHECK_THROWS_WITH(f.read<std::int32_t>("a", std::span<std::int32_t>(), shape), Contains("tensor 'a' has dtype F32, expected I32"));
  std::vector<std::int64_t> wrong = {3, 2};
  CHECK_THROWS_WITH(f.read<float>("a", a2, wrong), Contains("tensor 'a' has shape [2,3], expected [3,2]"));
  CHECK_THROWS_WITH(f.tensor("zzz"), Contains("no tensor 'zzz'"));
}

TEST_CASE("F16 and BF16 tensors (pretrained checkpoints' storage) read as float, every half exactly", "[checkpoint]") {
  // All 65536 halves, against the format's definition: (-1)^s 2^(e-15) (1 + m/1024), subnormal 2^-14 m/1024.
  std::vector<std::uint16_t> halves(65536);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = std::uint16_t(i);
  const std::vector<std::uint16_t> bf16 = {0x3F80, 0x4049, 0xFF80, 0x0001, 0x7F7F, 0x8000};  // 1, 3.140625, -inf, least subnormal, largest, -0
  const std::vector<std::int32_t> ints = {1, 2};
  const fs::path p = scratch("halves.safetensors");
  std::vector<checkpoint::TensorView> t = {{"h", checkpoint::DType::F16, {256, 256}, std::as_bytes(std::span<const std::uint16_t>(halves))},
                                           {"b", checkpoint::DType::BF16, {6}, std::as_bytes(std::span<const std::uint16_t>(bf16))},
                                           checkpoint::view_of<std::int32_t>("i", ints, {2})};
  checkpoint::save(p, t);
  const checkpoint::File f(p);
  CHECK(f.tensor("h").dtype == checkpoint::DType::F16);
  std::vector<float> h(65536);
  const std::vector<std::int64_t> hs = {256, 256};
  f.read_float("h", h, hs);
  for (std::size_t i = 0; i < halves.size(); ++i) {
    const int s = int(i >> 15), e = int(i >> 10) & 31, m = int(i) & 1023;
    const double magnitude = e == 31 ? (m ? std::nan("") : INFINITY) : e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    const double want = s ? -magnitude : magnitude;
    if (std::isnan(want)) REQUIRE(std::isnan(h[i]));
    else REQUIRE((double(h[i]) == want && std::signbit(h[i]) == bool(s)));
  }
  std::vector<float> b(6);
  const std::vector<std::int64_t> bs = {6};
  f.read_float("b", b, bs);
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == 3.140625f);
  CHECK((std::isinf(b[2]) && b[2] < 0));
  CHECK(b[3] == std::ldexp(1.0f, -133));
  CHECK(b[4] == std::ldexp(1.9921875f, 127));  // bfloat16's largest
  CHECK((b[5] == 0.0f && std::signbit(b[5])));
  // F32 through read_float is read's copy; integers and the exact-dtype read are refused, naming the dtype.
  std::vector<float> two(2);
  CHECK_THROWS_WITH(f.read_float("i", two, std::vector<std::int64_t>{2}), Contains("tensor 'i' has dtype I32, not a floating-point one"));
  CHECK_THROWS_WITH(f.read<float>("b", b, bs), Contains("tensor 'b' has dtype BF16, expected F32"));
  CHECK_THROWS_WITH(f.read_float("b", b, std::vector<std::int64_t>{3, 2}), Contains("tensor 'b' has shape [6], expected [3,2]"));
}

TEST_CASE("truncated or corrupt checkpoints give one clear error", "[checkpoint][errors]") {
  std::vector<float> a(1000, 1.0f);
  const fs::path p = scratch("bad.safetensors");
  std::vector<checkpoint::TensorView> t = {checkpoint::view_of<float>("weights", a, {1000})};
  checkpoint::save(p, t);
  const auto full = fs::file_size(p);
  truncate_to(p, full - 100);
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("tensor 'weights'") && Contains("truncated"));
  truncate_to(p, 20);
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("header length") && Contains("truncated"));
  truncate_to(p, 3);
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("truncated (3 bytes"));
  {
    std::ofstream garbage(p, std::ios::binary);
    const char len[8] = {16, 0, 0, 0, 0, 0, 0, 0};
    garbage.write(len, 8);
    garbage << "not json!!      ";
  }
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("header is not valid JSON"));
  CHECK_THROWS_WITH(checkpoint::File(scratch("missing.safetensors")), Contains("cannot open"));
}

namespace {
std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const fs::path& p, const std::string& b) { std::ofstream(p, std::ios::binary | std::ios::trunc) << b; }
}  // namespace

TEST_CASE("a damaged checkpoint never loads: header length, coverage of the data, checksum, nesting", "[checkpoint][errors]") {
  std::vector<float> a(64), b(32);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i);
  const fs::path p = scratch("damaged.safetensors");
  std::vector<checkpoint::TensorView> t = {checkpoint::view_of<float>("a", a, {64}), checkpoint::view_of<float>("b", b, {32})};
  checkpoint::save(p, t);
  const std::string good = read_bytes(p);
  CHECK_NOTHROW(checkpoint::File(p));
  // The header length short by 1..7 bytes (the old reader shifted every tensor and read garbage).
  for (int k = 1; k <= 7; ++k) {
    std::string bad = good;
    bad[0] = char(std::uint8_t(bad[0]) - k);
    write_bytes(p, bad);
    INFO("length short by " << k);
    CHECK_THROWS_WITH(checkpoint::File(p), Contains("not a multiple of 8"));
  }
  write_bytes(p, good + "trailing");
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("after the last tensor belong to no tensor"));
  // One flipped bit in the data: the checksum refuses it.
  std::string flipped = good;
  flipped[flipped.size() - 5] = char(flipped[flipped.size() - 5] ^ 0x10);
  write_bytes(p, flipped);
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("does not match its checksum"));
  // A header nested 100,000 deep is refused before it is parsed.
  std::string deep(8, '\0');
  std::string json(100000, '[');
  json.append((8 - json.size() % 8) % 8, ' ');
  for (int i = 0; i < 8; ++i) deep[std::size_t(i)] = char((json.size() >> (8 * i)) & 0xff);
  write_bytes(p, deep + json);
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("nests deeper than 64"));
}


TEST_CASE("a checkpoint whose shape or offsets are not integers is refused, naming them", "[checkpoint][errors]") {
  // The fuzzer's find: a float such as 1e300 converted to an integer is undefined behaviour.
  const fs::path p = scratch("float_dims.safetensors");
  auto file = [](const std::string& shape, const std::string& offsets) {
    std::string json = R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[std::size_t(i)] = char((json.size() >> (8 * i)) & 0xff);
    return bytes + json + std::string(4, '\0');
  };
  write_bytes(p, file("[1]", "[0,4]"));
  CHECK_NOTHROW(checkpoint::File(p));
  write_bytes(p, file("[1e300]", "[0,4]"));
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("tensor 'a'") && Contains("shape is not a list of integers"));
  write_bytes(p, file("[1]", "[0,4.0]"));
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("data_offsets is not a list of integers"));
  write_bytes(p, file("7", "[0,4]"));
  CHECK_THROWS_WITH(checkpoint::File(p), Contains("shape is not a list of integers"));
}

TEST_CASE("a checkpoint of another model is refused, naming the tensor", "[checkpoint][errors]") {
  Program<OTHER> o;
  const fs::path p = scratch("other.safetensors");
  checkpoint::save_training<float>(p, o, nullptr);
  Program<MLP> m;
  CHECK_THROWS_WITH(checkpoint::load_training<float>(p, m, nullptr), Contains("tensor 'fc1.weight' has shape [8,6], expected [16,6]"));
}

TEST_CASE("a crash in the middle of a write leaves the previous checkpoint intact", "[checkpoint]") {
  const fs::path p = scratch("atomic.safetensors");
  std::vector<float> small(10, 2.0f);
  std::vector<checkpoint::TensorView> t = {checkpoint::view_of<float>("w", small, {10})};
  checkpoint::save(p, t);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Writes a 16 MiB checkpoint over the same path with a file-size limit of 1 MiB: the kernel
    // kills the writer (SIGXFSZ) in the middle of its write, whatever the machine's speed or load.
    // No core file; the signal's default action, unblocked, whatever the parent inherited.
    try {
      ::prctl(PR_SET_DUMPABLE, 0);
      std::signal(SIGXFSZ, SIG_DFL);
      sigset_t xfsz;
      sigemptyset(&xfsz);
      sigaddset(&xfsz, SIGXFSZ);
      ::sigprocmask(SIG_UNBLOCK, &xfsz, nullptr);
      std::vector<float> big(std::size_t(1) << 22, 3.0f);
      std::vector<checkpoint::TensorView> tb = {checkpoint::view_of<float>("w", big, {std::int64_t(big.size())})};
      const rlimit limit{1 << 20, 1 << 20};
      ::setrlimit(RLIMIT_FSIZE, &limit);
      checkpoint::save(p, tb);
    } catch (...) {
      ::_exit(2);  // never back into the test runner
    }
    ::_exit(0);
  }

  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGXFSZ);
  // The killed writer left its partial temporary file (1 MiB); the checkpoint is the old one, whole.
  fs::path tmp;  // ".atomic.safetensors.tmp.<child's pid>.<n>"
  const std::string prefix = ".atomic.safetensors.tmp." + std::to_string(child) + ".";
  for (const auto& e : fs::directory_iterator(p.parent_path()))
    if (e.path().filename().string().starts_with(prefix)) tmp = e.path();
  CHECK(fs::exists(tmp));
  if (fs::exists(tmp)) CHECK(fs::file_size(tmp) == std::uintmax_t(1) << 20);
  fs::remove(tmp);
  checkpoint::File f(p);
  std::vector<float> back(10);
  std::vector<std::int64_t> shape = {10};
  f.read<float>("w", back, shape);
  CHECK(back == small);
}

TEST_CASE("two threads saving one file at once: it is always one of their files, whole, and no temporary is left", "[checkpoint]") {
  // Each write has a temporary file of its own (`.tmp.<pid>.<n>`); with one name per process the
  // two would truncate and rename each other's.
  const fs::path p = scratch("shared.txt");
  const std::string a(300000, 'a'), b(200000, 'b');
  checkpoint::write_atomically(p, a);
  std::atomic<bool> done{false};
  std::atomic<int> torn{0}, errors{0};
  auto writer = [&](const std::string& text) {
    try {
      for (int i = 0; i < 40; ++i) checkpoint::write_atomically(p, text);
    } catch (const std::exception&) {
      ++errors;
    }
  };
  std::thread reader([&] {  // every read sees a whole file, one or the other
    while (!done) {
      std::ifstream in(p, std::ios::binary);
      const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (got != a && got != b) ++torn;
    }
  });
  std::thread w1(writer, std::cref(a)), w2(writer, std::cref(b));
  w1.join(), w2.join();
  done = true;
  reader.join();
  CHECK(errors == 0);
  CHECK(torn == 0);
  std::ifstream in(p, std::ios::binary);
  const std::string last((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK((last == a || last == b));
  int temporaries = 0;
  for (const auto& e : fs::directory_iterator(p.parent_path())) temporaries += e.path().filename().string().starts_with(".shared.txt.tmp.");
  CHECK(temporaries == 0);
}

TEST_CASE("a temporary file is always a new file: never opened through a link put at its name", "[checkpoint]") {
  const fs::path dir = scratch("temporaries");  // a folder of its own: other tests look for stray temporaries
  fs::create_directories(dir);
  const fs::path target = dir / "plot.png", precious = dir / "precious.txt";
  std::ofstream(precious) << "mine";
  std::string first;
  ::close(checkpoint::create_temporary(target, first));
  long pid = 0;
  REQUIRE(checkpoint::is_temporary_name(fs::path(first).filename().string(), pid));
  CHECK(pid == long(::getpid()));
  // Links to a user's file at the next names this process would take.
  const std::string stem = first.substr(0, first.rfind('.') + 1);
  const long n = std::stol(first.substr(first.rfind('.') + 1));
  for (long k = 1; k <= 4; ++k) fs::create_symlink(precious, stem + std::to_string(n + k));
  std::string tmp;
  const int fd = checkpoint::create_temporary(target, tmp);
  REQUIRE(fd >= 0);
  CHECK(::write(fd, "junk", 4) == 4);
  ::close(fd);
  CHECK(fs::is_regular_file(fs::symlink_status(tmp)));
  std::ifstream in(precious);
  const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(kept == "mine");
  for (const char* name : {".notes.tmp.2024-05-01", ".a.tmp.", ".a.tmp.12x", "a.tmp.12.1", ".tmp.12.1", ".a.tmp.12", ".a.tmp.99999999.1"})
    CHECK_FALSE(checkpoint::is_temporary_name(name, pid));
  CHECK(checkpoint::is_temporary_name(".a.tmp.12.0", pid));
  CHECK(checkpoint::is_temporary_name(".a.png.gp.tmp.12.3", pid));
  fs::remove_all(dir);
}

TEST_CASE("a stale temporary is one no writer holds: its lock, not only its pid, says so", "[checkpoint]") {
  const fs::path dir = scratch("stale_locks");
  fs::create_directories(dir);
  const pid_t dead = ctgrad::testing::dead_pid();
  // A writer in another pid namespace: its pid means nothing here, its lock does.
  const fs::path held = dir / (".plot.png.tmp." + std::to_string(dead) + ".0"), left = dir / (".plot.png.tmp." + std::to_string(dead) + ".1");
  std::ofstream(held) << "writing";
  std::ofstream(left) << "killed";
  const int fd = ::open(held.c_str(), O_RDONLY);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  auto all = [](const std::string&) { return true; };
  CHECK(checkpoint::remove_stale_temporaries(dir, all) == 1);
  CHECK(fs::exists(held));
  CHECK_FALSE(fs::exists(left));
  ::close(fd);
  CHECK(checkpoint::remove_stale_temporaries(dir, [](const std::string& of) { return of == "other.png"; }) == 0);  // not one of its files
  CHECK(checkpoint::remove_stale_temporaries(dir, all) == 1);
  CHECK_FALSE(fs::exists(held));
  fs::remove_all(dir);
}

TEST_CASE("a file whose name is as long as a name may be (255 bytes) is saved: its temporary name fits too", "[checkpoint]") {
  const std::string text(1000, 'b');
  const fs::path longest = scratch(std::string(255, 'n'));
  checkpoint::write_atomically(longest, text);
  CHECK(fs::file_size(longest) == text.size());
}

namespace {
struct Run {
  std::vector<float> losses, params;
};
void feed(Program<MLP>& p, int step) {
  std::vector<float> x(32 * 6);
  std::vector<std::int32_t> y(32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * float(i) + float(step));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t((i + std::size_t(step)) % 3);
  p.set_input("x", std::span<const float>(x), {32, 6});
  p.set_input("y", std::span<const std::int32_t>(y), {32});
}
void train(Program<MLP>& p, optim::AdamW<float>& opt, int from, int to, Run& r) {
  for (int step = from; step < to; ++step) {
    feed(p, step);
    p.zero_grad();
    p.forward();
    p.backward();
    opt.step();
    r.losses.push_back(p.loss());
  }
  auto v = p.parameter_values();
  r.params.assign(v.begin(), v.end());
}
}  // namespace

TEST_CASE("resuming from a checkpoint continues the loss curve bit for bit", "[checkpoint]") {
  const auto opts = optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.1};
  Run straight, resumed;
  {
    Program<MLP> p(Options{.seed = 11});
    optim::AdamW<float> opt(p.parameters(), opts);
    train(p, opt, 0, 20, straight);
  }
  const fs::path ck = scratch("resume.safetensors");
  {
    Program<MLP> p(Options{.seed = 11});
    optim::AdamW<float> opt(p.parameters(), opts);
    train(p, opt, 0, 10, resumed);
    checkpoint::save_training<float>(ck, p, &opt, {{"config", "mlp"}});
  }
  {
    Program<MLP> p(Options{.seed = 99});  // a different init: everything must come from the file
    optim::AdamW<float> opt(p.parameters(), opts);
    auto meta = checkpoint::load_training<float>(ck, p, &opt);
    CHECK(meta.at("config") == "mlp");
    CHECK(opt.steps() == 10);
    train(p, opt, 10, 20, resumed);
  }
  REQUIRE(resumed.losses.size() == straight.losses.size());
  CHECK(std::memcmp(resumed.losses.data(), straight.losses.data(), straight.losses.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(resumed.params.data(), straight.params.data(), straight.params.size() * sizeof(float)) == 0);
}
