// Hostile input to the writers of other languages (gnuplot, HTML, CSV, JSON, Markdown, shell) and
// to ablation studies: sizes that would wrap, a study folder that cannot be written, two studies
// on one folder, damaged results. `ctgrad`'s side of the same is tests/apps/hostile_test.sh.
#include <catch2/catch.hpp>

#include <cctype>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <ctgrad/training/ablation.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/log.hpp>

#include "../scratch.hpp"

using namespace ctgrad::training;
namespace ab = ctgrad::training::ablation;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

// Strings an adversarial user would try: a newline that starts a gnuplot command, quotes of every
// kind, markup, a CSV break, control bytes, Markdown's table and code syntax.
const std::vector<std::string> kHostile = {
    "=HYPERLINK(\"http://x\")", "-cmd|' /C calc'!A0", "+1+1",
    "r\nsystem \"touch PWNED\"\nx", "it's", "say \"hi\"", "<script>alert(1)</script>", "a,b", "tab\there", "cr\rlf", "`tick`", "a|b",
    "$(touch PWNED)", "`touch PWNED`", "@macro", "back\\slash", "end\x1b[2J", std::string("nul\0byte", 8), "EOD\nsystem 'touch PWNED'",
    "x' ; system 'touch PWNED' ; '", "csi\xc2\x9b" "2J", "osc\xc2\x9d" "0;title\xc2\x9c", "raw\x9b" "2J\x9d", "[x](javascript:alert(1))",
    "![i](http://x/y.png)", "50%dropout", "run_%g", "%s%n%d", "'quoted' study", "'", "''", "\"", "\\"};

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// What csv_field makes of a text field: a spreadsheet formula gets a leading '.
std::string csv_text(const std::string& s) { return !s.empty() && std::string("=+-@\t\r").find(s[0]) != std::string::npos ? "'" + s : s; }

bool has_control(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

// What a terminal shows as it is: UTF-8 without C0, DEL or C1 (U+0080..U+009F: CSI, OSC, ...).
bool terminal_safe(const std::string& s) {
  if (has_control(s) || !utf8_error(s).empty()) return false;
  for (std::size_t i = 0; i + 1 < s.size(); ++i)
    if (static_cast<unsigned char>(s[i]) == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) return false;
  return true;
}

// RFC 4180 records back into fields.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') rows.back().back() += '"', ++i;
      else if (c == '"') quoted = false;
      else rows.back().back() += c;
    } else if (c == '"') quoted = true;
    else if (c == ',') rows.back().emplace_back();
    else if (c == '\n') rows.emplace_back(1);
    else rows.back().back() += c;
  }
  if (rows.back().size() == 1 && rows.back()[0].empty()) rows.pop_back();
  return rows;
}

// A study whose runs write a metrics.jsonl of two validations (no training).
int fake_run(const ab::RunSpec& r, const ab::RunContext&) {
  std::ofstream f(r.dir / "metrics.jsonl");
  const double base = 2.0 + 0.1 * double(r.seed);
  f << json{{"step", 10}, {"val_loss", base}, {"metric", "loss"}, {"train_seconds", 1.5}}.dump() << "\n";
  f << json{{"step", 20}, {"val_loss", base - 0.5}, {"metric", "loss"}, {"train_seconds", 3.0}}.dump() << "\n";
  return 0;
}

}  // namespace

TEST_CASE("escaping: each writer's function keeps a hostile string data", "[escape]") {
  for (const std::string& s : kHostile) {
    INFO(printable(s));
    // gnuplot: one line, one double-quoted string holding no quote, backquote or @ (each an octal
    // escape); what gnuplot reads back is checked below.
    const std::string g = gnuplot_quote(s);
    CHECK_FALSE(has_control(g));
    CHECK(g.front() == '"');
    CHECK(g.back() == '"');
    const std::string inner = g.substr(1, g.size() - 2);
    CHECK(inner.find_first_of("\"'`@") == std::string::npos);
    for (std::size_t i = 0; i < inner.size(); ++i)
      if (inner[i] == '\\') CHECK((i + 3 < inner.size() && std::isdigit(static_cast<unsigned char>(inner[i + 1]))));
    // HTML: no markup, no quote that ends an attribute.
    const std::string h = html_escape(s);
    CHECK(h.find_first_of("<>\"'") == std::string::npos);
    CHECK_FALSE(has_control(h));
    // CSV: one field, read back as it was.
    const auto rows = parse_csv(csv_line({s, "next"}));
    REQUIRE(rows.size() == 1);
    REQUIRE(rows[0].size() == 2);
    CHECK(rows[0][0] == csv_text(s));
    CHECK(rows[0][1] == "next");
    // Markdown: one line, no bare | that would split a table's cell.
    const std::string m = markdown_code(s);
    CHECK_FALSE(has_control(m));
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i] == '|') CHECK((i > 0 && m[i - 1] == '\\'));
    // A terminal line.
    CHECK(terminal_safe(printable(s)));
    // Markdown text: no link or image syntax left live.
    const std::string mt = markdown_text(s);
    CHECK_FALSE(has_control(mt));
    for (std::size_t i = 0; i < mt.size(); ++i)
      if (std::string("[]()!|`*_").find(mt[i]) != std::string::npos) CHECK((i > 0 && mt[i - 1] == '\\'));
    // Shell: a quoted word that the shell gives back unchanged (NUL cannot be an argument).
    if (s.find('\0') == std::string::npos) {
      const fs::path out = ctgrad::testing::scratch("shell_word.txt");
      const std::string cmd = "printf '%s' " + shell_quote(s) + " > " + shell_quote(out.string());
      REQUIRE(std::system(cmd.c_str()) == 0);
      CHECK(read(out) == s);
    }
  }
  // A tic label is a format string to gnuplot: its % doubled, so "run_%g" is not "run_1".
  CHECK(gnuplot_label("run_%g") == "\"run_%%g\"");
  CHECK(gnuplot_label("it's 50%") == "\"it\\047s 50%%\"");
  // What gnuplot itself reads from each quoted string: the text as written (a control byte as
  // the visible \xNN), and nothing run.
  if (fs::exists("/usr/bin/gnuplot")) {
    const fs::path dir = ctgrad::testing::scratch("gnuplot_reads");
    fs::create_directories(dir);
    std::string script, want;
    for (const std::string& s : kHostile) {
      script += "print " + gnuplot_quote(s) + "\n";
      for (char c : s) want += has_control(std::string(1, c)) ? "\\x" + std::string(1, "0123456789abcdef"[(unsigned char)c >> 4]) + std::string(1, "0123456789abcdef"[c & 15]) : std::string(1, c);
      want += "\n";
    }
    std::ofstream(dir / "print.gp") << script;
    const std::string cmd = "cd " + shell_quote(dir.string()) + " && /usr/bin/gnuplot print.gp > out.txt 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    CHECK(read(dir / "out.txt") == want);
    CHECK_FALSE(fs::exists(dir / "PWNED"));
  }
  CHECK(control_byte("ok") == "");
  CHECK(control_byte("a\nb") == "byte 0x0a at position 1");
  CHECK(control_byte("ab\xc2\x9b" "2J") == "U+009B at position 2");
  CHECK(control_byte("Gr\xc3\xbc\xc3\x9f \xc2\xa0") == "");  // a no-break space is text
  CHECK(printable("a\xc2\x9b" "b") == "a\\xc2\\x9bb");
  CHECK(printable("a\x9b" "b\xff") == "a\\x9bb\\xff");
  CHECK(printable("Gr\xc3\xbc\xc3\x9f") == "Gr\xc3\xbc\xc3\x9f");
  CHECK(utf8_error("Gr\xc3\xbc\xc3\x9f Gott") == "");
  CHECK(utf8_error("bad \xff") == "byte 0xff at position 4");
  CHECK(utf8_error("\xc0\xaf") != "");       // overlong
  CHECK(utf8_error("\xed\xa0\x80") != "");   // a surrogate
  CHECK(utf8_error("\xe2\x82") != "");       // cut short
}

TEST_CASE("numbers in reports: extreme values are exact, never cut by a buffer", "[escape]") {
  CHECK(format_number(1.5, 4) == "1.5000");
  CHECK(format_number(-2.25, 2) == "-2.25");
  CHECK(format_number(0.125, 3, true) == "+0.125");
  CHECK(format_number(1e308, 4) == "1.0000e+308");
  CHECK(format_number(-1.7976931348623157e308, 6) == "-1.797693e+308");
  CHECK(format_number(5e-324, 4) == "0.0000");
  CHECK(format_number(std::numeric_limits<double>::infinity(), 4) == "inf");
  CHECK(format_number(-std::numeric_limits<double>::infinity(), 4) == "-inf");
  CHECK(format_number(std::nan(""), 4) == "");
  CHECK(format_number(123456789012345.0, 2) == "123456789012345.00");
  // Data (CSV): exact, however small or large.
  for (double v : {1.2e-7, 3.4e-7, 1e-320, -0.0, 1e308, -1.7976931348623157e308, 0.1, 2.0 / 3.0}) CHECK(std::strtod(exact_number(v).c_str(), nullptr) == v);  // (strtod: a subnormal reads back, with ERANGE)
  CHECK(exact_number(std::nan("")) == "");
  CHECK(exact_number(std::numeric_limits<double>::infinity()) == "inf");
}

TEST_CASE("durations are bounded: a huge, negative or NaN time is no overflow", "[escape]") {
  CHECK(format_duration(5.4) == "5s");
  CHECK(format_duration(125) == "2m05s");
  CHECK(format_duration(3725) == "1h02m");
  CHECK(format_duration(1e308) == "more than 100000h");
  CHECK(format_duration(-5) == "?");
  CHECK(format_duration(std::nan("")) == "?");
}

TEST_CASE("CSV cells a spreadsheet would run are text, and Markdown text holds no raw HTML", "[escape]") {
  CHECK(csv_field("=1+1") == "'=1+1");
  CHECK(csv_field("@SUM(A1)") == "'@SUM(A1)");
  CHECK(csv_field("+cmd") == "'+cmd");
  CHECK(csv_field("-0.5") == "-0.5");  // a number stays a number
  CHECK(csv_field("+1e-3") == "+1e-3");
  CHECK(csv_field("lr=1e-3") == "lr=1e-3");
  CHECK(markdown_text("<script>alert(1)</script> & more") == "&lt;script&gt;alert\\(1\\)&lt;/script&gt; &amp; more");
  CHECK(markdown_text("[x](javascript:alert(1))") == "\\[x\\]\\(javascript:alert\\(1\\)\\)");
  CHECK(markdown_text("a\nb") == "a\\x0ab");
}

TEST_CASE("hostile strings through every writer of a study's report and of the loss plot", "[escape][ablation]") {
  const fs::path root = ctgrad::testing::scratch("hostile_report");
  fs::create_directories(root);
  const bool have_gnuplot = fs::exists("/usr/bin/gnuplot");
  struct Cwd {  // a `system "touch PWNED"` that ran would write into the working folder: root
    fs::path before = fs::current_path();
    explicit Cwd(const fs::path& p) { fs::current_path(p); }
    ~Cwd() { fs::current_path(before); }
  } cwd(root);
  for (std::size_t i = 0; i < kHostile.size(); ++i) {
    const std::string& s = kHostile[i];
    INFO(printable(s));
    const fs::path dir = root / ("study" + std::to_string(i));
    ab::StudyOptions o{.name = s, .model = "fake", .grid = {{"key", {"base", s}}}, .seeds = 2, .dir = dir, .jobs = 1, .threads = 1};
    ab::Study study(o);
    REQUIRE(study.run(fake_run) == 0);
    study.report();
    CHECK_FALSE(fs::exists(root / "PWNED"));
    // JSON: the configuration and the value back as they were.
    const json res = json::parse(read(dir / "results.json"));
    REQUIRE(res["configurations"].size() == 2);
    if (utf8_error(s).empty()) {  // (bytes that are not UTF-8 are written as U+FFFD: `ctgrad ablate` refuses them up front)
      CHECK(res["configurations"][1]["values"]["key"] == s);
      CHECK(res["configurations"][1]["config"] == "key=" + s);
    }
    // CSV: a header and two rows, each with all its fields; the value read back as it was.
    const auto rows = parse_csv(read(dir / "results.csv"));
    REQUIRE(rows.size() == 3);
    CHECK(rows[1].size() == rows[0].size());
    CHECK(rows[2].size() == rows[0].size());
    CHECK(rows[2][0] == "key=" + s);
    CHECK(rows[2][1] == csv_text(s));
    // HTML: the only tags are the report's own.
    const std::string html = read(dir / "results.html");
    CHECK(html.find("<script>") == std::string::npos);
    CHECK(html.find(html_escape("key=" + s)) != std::string::npos);
    // Markdown: the table has its header, its rule and one line per configuration.
    const std::string md = read(dir / "results.md");
    CHECK(md.find("| " + markdown_code("key=" + s) + " | 2 |") != std::string::npos);
    if (have_gnuplot) {  // the plots were drawn (a script broken by the string would fail)
      CHECK(fs::is_regular_file(dir / "curves.png"));
      CHECK(fs::is_regular_file(dir / "final.png"));
    }
  }
  // The loss plot of a run folder whose name is hostile: drawn, and nothing else run.
  if (have_gnuplot)
    for (std::size_t i = 0; i < kHostile.size(); ++i) {
      const std::string& s = kHostile[i];
      if (s.find('\0') != std::string::npos || s.find('/') != std::string::npos) continue;
      INFO(printable(s));
      const fs::path run = root / ("run " + s);
      fs::create_directories(run);
      std::ofstream(run / "metrics.csv") << "step,loss,lr,tok_per_s,val_loss\n1,3,0.001,100,\n2,2.5,0.001,100,2.4\n";
      plot_loss(run / "metrics.csv", run / "loss.png", "nats/" + s);
      CHECK(fs::is_regular_file(run / "loss.png"));
      CHECK_FALSE(fs::exists(root / "PWNED"));
    }
}

// Runs whose finals gnuplot cannot draw (1e308 and -1e308: no range fits both).
int extreme_run(const ab::RunSpec& r, const ab::RunContext&) {
  std::ofstream f(r.dir / "metrics.jsonl");
  const double v = r.config.find("other") != std::string::npos ? 1e308 : -1e308;
  f << json{{"step", 10}, {"val_loss", v}, {"metric", "loss"}, {"train_seconds", 1.5}}.dump() << "\n";
  return 0;
}

TEST_CASE("a plot that is not drawn again is removed, not left from the last report", "[ablation]") {
  if (!fs::exists("/usr/bin/gnuplot")) return;
  const fs::path dir = ctgrad::testing::scratch("stale_plot");
  ab::StudyOptions o{.name = "stale", .model = "fake", .grid = {{"key", {"base", "other"}}}, .seeds = 1, .dir = dir, .jobs = 1, .threads = 1};
  {
    ab::Study study(o);
    REQUIRE(study.run(fake_run) == 0);
    study.report();
  }
  REQUIRE(fs::is_regular_file(dir / "final.png"));
  // The same study, its results replaced by finals no plot can hold: the old pictures go.
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == "metrics.jsonl" || e.path().filename() == "result.json") fs::remove(e.path());
  ab::Study again(o);
  REQUIRE(again.run(extreme_run) == 0);
  again.report();
  CHECK_FALSE(fs::exists(dir / "final.png"));
  CHECK(read(dir / "results.md").find("final.png") == std::string::npos);
}

TEST_CASE("study sizes are counted without wrapping and capped before anything is allocated", "[ablation]") {
  auto values = [](int n) {
    std::vector<std::string> v;
    for (int i = 0; i < n; ++i) v.push_back(std::to_string(i));
    return v;
  };
  const fs::path dir = ctgrad::testing::scratch("huge_study");
  ab::StudyOptions o{.name = "huge", .seeds = 1, .dir = dir, .yes = true};
  for (int k = 0; k < 8; ++k) o.grid.push_back({"k" + std::to_string(k), values(256)});  // 2^64: wraps to 0 in 64 bits
  CHECK_THROWS_WITH(ab::Study(o), Contains("more than 10000 configurations (256 x 256 x 256 x 256 x 256 x 256 x 256 x 256)"));
  o.grid.resize(3);
  o.grid.push_back({"k3", values(128)});  // 2^31: negative in an int
  CHECK_THROWS_WITH(ab::Study(o), Contains("the 10000 runs a study can hold"));
  o.grid = {{"a", values(100)}, {"b", values(50)}};
  o.seeds = 3;  // 5000 configurations x 3 seeds
  CHECK_THROWS_WITH(ab::Study(o), Contains("5000 configurations x 3 seeds = 15000 runs"));
  o.yes = false;
  o.seeds = 1;
  CHECK_THROWS_WITH(ab::Study(o), Contains("add --yes"));
}

TEST_CASE("a study whose folder cannot be written ends with an error in the caller, not an abort", "[ablation]") {
  const fs::path dir = ctgrad::testing::scratch("blocked_study");
  ab::Study study({.name = "blocked", .grid = {{"key", {"a", "b"}}}, .seeds = 1, .dir = dir, .jobs = 2, .threads = 2});
  study.prepare();
  // The first configuration's folder is a regular file: its run cannot start, nor its result be kept.
  fs::create_directories(dir / "runs");
  std::ofstream(study.runs()[0].dir.parent_path()) << "in the way";
  CHECK_THROWS_WITH(study.run(fake_run), Contains("the study cannot go on") && Contains("cannot make the run folder"));
  // A run whose folder cannot take failed.json (it is a folder): the write fails; the error comes back.
  const fs::path dir2 = ctgrad::testing::scratch("unwritable_result");
  ab::Study study2({.name = "unwritable", .grid = {{"key", {"a"}}}, .seeds = 1, .dir = dir2, .jobs = 1, .threads = 1});
  study2.prepare();
  fs::create_directories(study2.runs()[0].dir / "failed.json" / "x");
  CHECK_THROWS_WITH(study2.run([](const ab::RunSpec&, const ab::RunContext&) { return 1; }), Contains("the study cannot go on"));
}

TEST_CASE("a study folder is locked: a second study on it is refused, naming the holder", "[ablation]") {
  const fs::path dir = ctgrad::testing::scratch("locked_study");
  const ab::StudyOptions o{.name = "locked", .grid = {{"key", {"a"}}}, .seeds = 1, .dir = dir, .jobs = 1, .threads = 1};
  ab::Study first(o);
  first.prepare();
  ab::Study second(o);
  CHECK_THROWS_WITH(second.prepare(), Contains("is in use by another ctgrad ablate (pid " + std::to_string(::getpid()) + ")"));
  CHECK(first.run(fake_run) == 0);  // the holder goes on
}

TEST_CASE("a damaged result is named with its key and left out, and the report is still written", "[ablation]") {
  const fs::path dir = ctgrad::testing::scratch("damaged_study");
  ab::Study study({.name = "damaged", .grid = {{"key", {"a", "b"}}}, .seeds = 2, .dir = dir, .jobs = 1, .threads = 1});
  REQUIRE(study.run(fake_run) == 0);
  const fs::path bad = study.runs()[3].dir / "result.json";
  json res = json::parse(read(bad));
  for (const json& v : {json("1.5"), json(nullptr), json(true)}) {
    res["final"]["loss"] = v;
    std::ofstream(bad) << res.dump(2);
    const auto damage = study.damage();
    REQUIRE(damage.size() == 1);
    CHECK_THAT(damage[0], Contains(bad.string()) && Contains("'final.loss'") && Contains("not a number"));
    fs::remove(dir / "results.md");
    CHECK_NOTHROW(study.report());
    CHECK(fs::is_regular_file(dir / "results.md"));
    const json out = json::parse(read(dir / "results.json"));
    CHECK(out["configurations"][1]["seeds"] == 1);  // the good seed of that configuration
  }
}

TEST_CASE("long grid values give folder names within the file system's limits, distinct", "[ablation]") {
  const std::string a(300, 'a'), b = std::string(299, 'a') + "b";
  ab::Study study({.name = "long", .grid = {{"key", {a, b}}}, .seeds = 1, .dir = ctgrad::testing::scratch("long_study")});
  const fs::path da = study.runs()[0].dir.parent_path().filename(), db = study.runs()[1].dir.parent_path().filename();
  CHECK(da.string().size() <= 130);
  CHECK(da != db);
}

TEST_CASE("one at a time: the baseline, then each key's other values alone", "[ablation]") {
  const fs::path dir = ctgrad::testing::scratch("one_at_a_time");
  ab::StudyOptions o{.name = "ofat", .grid = {{"pos", {"learned", "rope"}}, {"act", {"gelu", "swiglu", "relu"}}, {"bias", {"true"}}},
                     .one_at_a_time = true, .seeds = 2, .dir = dir};
  {
    const ab::Study s(o);
    std::vector<std::string> configs;
    for (std::size_t i = 0; i < s.runs().size(); i += 2) configs.push_back(s.runs()[i].config);
    CHECK(configs == std::vector<std::string>{"pos=learned,act=gelu,bias=true", "pos=rope", "act=swiglu", "act=relu"});
    CHECK(s.runs().size() == 8);
    const ab::RunSpec& relu = s.runs()[6];  // every key's value is set: the others at the baseline's
    CHECK((relu.value("pos") == "learned" && relu.value("act") == "relu" && relu.value("bias") == "true" && relu.seed == 1));
    // The design is part of the study: the same keys as a grid are another study in that folder.
    s.prepare();
  }  // (its lock released)
  o.one_at_a_time = false;
  CHECK_THROWS_WITH(ab::Study(o).prepare(), Contains("holds another study"));
}
