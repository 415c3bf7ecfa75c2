// The EN-DE corpus builder (data/ende/): sentence alignment, placeholders, the DDTP and LibreOffice
// readers on small files in their real formats, and the split by document without leakage. No
// download: the fixtures are written here.
#include <catch2/catch.hpp>

#include "../scratch.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include <ctgrad/data/ende/corpus.hpp>
#include <ctgrad/data/ende/kept_spans.hpp>
#include <ctgrad/data/ende/process.hpp>
#include <ctgrad/data/ende/sources.hpp>
#include <ctgrad/data/text.hpp>

using namespace ctgrad::data::ende;
using ctgrad::testing::scratch;
namespace fs = std::filesystem;
using Strings = std::vector<std::string>;

namespace {
void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}
// A compiled gettext catalogue (.mo, GNU gettext manual) of these messages (sorted by msgid), its
// header declaring `charset`.
void write_mo(const fs::path& p, std::vector<std::pair<std::string, std::string>> msgs, const std::string& charset = "UTF-8") {
  msgs.insert(msgs.begin(), {"", "Project-Id-Version: x\nContent-Type: text/plain; charset=" + charset + "\nContent-Transfer-Encoding: 8bit\n"});
  std::sort(msgs.begin(), msgs.end());
  const auto n = std::uint32_t(msgs.size());
  std::string head(28 + 16 * n, '\0'), strings;
  auto put = [&](std::size_t at, std::uint32_t v) { std::memcpy(head.data() + at, &v, 4); };
  put(0, 0x950412de), put(4, 0), put(8, n), put(12, 28), put(16, 28 + 8 * n), put(20, 0), put(24, 0);
  for (int side = 0; side < 2; ++side)
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::string& t = side ? msgs[i].second : msgs[i].first;
      put(28 + 8 * (side * n + i), std::uint32_t(t.size()));
      put(28 + 8 * (side * n + i) + 4, std::uint32_t(head.size() + strings.size()));
      strings += t + '\0';
    }
  write(p, head + strings);
}
}  // namespace

TEST_CASE("ende: sentences split where a sentence ends, not after abbreviations, initials or ordinals") {
  CHECK(split_sentences("It works.  It is fast! Is it free? Yes.") == Strings{"It works.", "It is fast!", "Is it free?", "Yes."});
  CHECK(split_sentences("Use tools, e.g. Make. Then run.") == Strings{"Use tools, e.g. Make.", "Then run."});
  CHECK(split_sentences("Das gilt z. B. für Dateien. Am 1. Januar endet es.") == Strings{"Das gilt z. B. für Dateien.", "Am 1. Januar endet es."});
  CHECK(split_sentences("Er sagte: „Nein.“ Über alles.") == Strings{"Er sagte: „Nein.“", "Über alles."});
  CHECK(split_sentences("Version 2.0 is out. see below.") == Strings{"Version 2.0 is out. see below."});  // lower case after the dot: one
  CHECK(split_sentences("Wait... What?") == Strings{"Wait...", "What?"});
}

TEST_CASE("ende: placeholders of printf, Qt, brace fields, shell variables, tags and entities") {
  CHECK(placeholders("%s of %1$d files (%5.2f%%) in {dir} and {0}, $HOME ${x}") ==
        Strings{"$HOME", "${x}", "%1$d", "%5.2f", "%s", "{0}", "{dir}"});
  CHECK(placeholders("Copy %1 to %2") == Strings{"%1", "%2"});
  CHECK(placeholders("<b>bold</b> &amp; <a href=\"x\" title=\"Titel\">") == Strings{"&amp;", "</b>", "<a>", "<b>"});
  CHECK(placeholders("50 % more, 3 < 4 {not a field}").empty());
}

TEST_CASE("ende: pairs are checked for translation, lengths and placeholders") {
  using P = Placeholders;
  CHECK(check_pair("Open the file.", "Öffnen Sie die Datei.", P::keep) == Reject::none);
  CHECK(check_pair("Open", "Open", P::keep) == Reject::untranslated);
  CHECK(check_pair("", "x", P::keep) == Reject::empty);
  CHECK(check_pair("Open the file now, please, and then close it again.", "Ja.", P::keep) == Reject::ratio);
  CHECK(check_pair("Copy %s to %s", "%s nach %s kopieren", P::keep) == Reject::none);
  CHECK(check_pair("Copy %s to %d", "%s nach %s kopieren", P::keep) == Reject::placeholders);
  CHECK(check_pair("Copy %s to %s", "%s nach %s kopieren", P::drop) == Reject::placeholders);
  CHECK(check_pair(std::string(1200, 'a'), std::string(1100, 'b'), P::keep) == Reject::too_long);
  // Paragraphs split into sentences only where both sides give as many.
  auto two = align_paragraph("The first. The second one.", "Der erste. Der zweite.");
  REQUIRE(two.size() == 2);
  CHECK(two[1] == std::pair<std::string, std::string>{"The second one.", "Der zweite."});
  CHECK(align_paragraph("One. Two. Three.", "Eins, zwei. Drei.").size() == 1);
}

TEST_CASE("ende: DDTP records pair by Description-md5, paragraph by paragraph") {
  const fs::path en = scratch("ende/Translation-en"), de = scratch("ende/Translation-de");
  write(en,
        "Package: 0ad-data\nDescription-md5: 26581e685027d5ae84824362a4ba59ee\nDescription-en: Real-time strategy game of ancient warfare (data files)\n"
        " 0 A.D. (pronounced \"zero ey-dee\") is a free, open-source, cross-platform\n real-time strategy game.\n .\n"
        " This package contains the main data files required by 0 A.D.\n\n"
        "Package: tool\nDescription-md5: 00000000000000000000000000000001\nDescription-en: a tool\n Features:\n  * one\n  * two\n .\n It is small.\n\n"
        "Package: other\nDescription-md5: 00000000000000000000000000000002\nDescription-en: untranslated elsewhere\n\n");
  write(de,
        "Package: 0ad-data\nDescription-md5: 26581e685027d5ae84824362a4ba59ee\nDescription-de: Echtzeit-Strategiespiel über antike Kriegsführung (Datendateien)\n"
        " 0 A.D. ist ein freies, quelloffenes, plattformübergreifendes\n Echtzeit-Strategiespiel.\n .\n"
        " Dieses Paket enthält die wichtigsten von 0 A.D. benötigten Datendateien.\n\n"
        "Package: tool\nDescription-md5: 00000000000000000000000000000001\nDescription-de: ein Werkzeug\n Funktionen:\n  * eins\n  * zwei\n .\n Es ist klein.\n\n");
  const auto docs = ddtp_documents(en, de);
  REQUIRE(docs.size() == 2);
  CHECK(docs[0].id == "0ad-data");
  REQUIRE(docs[0].units.size() == 3);
  CHECK(docs[0].units[0].de == "Echtzeit-Strategiespiel über antike Kriegsführung (Datendateien)");
  CHECK(docs[0].units[1].en == "0 A.D. (pronounced \"zero ey-dee\") is a free, open-source, cross-platform real-time strategy game.");
  CHECK(docs[0].units[2].de == "Dieses Paket enthält die wichtigsten von 0 A.D. benötigten Datendateien.");
  // The list paragraph (verbatim lines) is left out; the next one pairs.
  REQUIRE(docs[1].units.size() == 2);
  CHECK(docs[1].units[1].en == "It is small.");
  CHECK(docs[1].units[1].de == "Es ist klein.");
  write(scratch("ende/empty"), "not a translation file\n");
  CHECK_THROWS_WITH(ddtp_documents(scratch("ende/empty"), de), Catch::Matchers::Contains("no descriptions"));
  CHECK_THROWS_WITH(ddtp_documents(scratch("ende/none"), de), Catch::Matchers::Contains("is missing"));
}

TEST_CASE("ende: LibreOffice help pages pair by par_id and hd_id on the same page") {
  const fs::path en = scratch("ende/help/en-US"), de = scratch("ende/help/de");
  write(en / "text/swriter/guide/insert.html",
        "<html><body><h1 id=\"hd_id3145\">Inserting <span class=\"emph\">Graphics</span></h1>\n"
        "<p id=\"par_id3149236\" class=\"listitem\" dir=\"auto\">Select the file. In the <span class=\"emph\">File type</span> box you can restrict the selection.</p>\n"
        "<p id=\"par_id1\">Press <span class=\"switchinline\"><span hidden=\"true\" class=\"MAC\">Command</span><span hidden=\"true\" id=\"default1\">Ctrl</span></span>+C &amp; go.</p>\n"
        "<p id=\"par_id2\">twice</p><p id=\"par_id2\">twice</p><p id=\"par_id3\">Only in English.</p></body></html>");
  write(de / "text/swriter/guide/insert.html",
        "<html><body><h1 id=\"hd_id3145\">Grafiken <span class=\"emph\">einfügen</span></h1>\n"
        "<p id=\"par_id3149236\" class=\"listitem\" dir=\"auto\">Wählen Sie eine Datei. Im Feld <span class=\"emph\">Dateityp</span> lässt sich die Auswahl beschränken.</p>\n"
        "<p id=\"par_id1\">Drücken Sie <span class=\"switchinline\"><span hidden=\"true\" class=\"MAC\">Befehl</span><span hidden=\"true\" id=\"default1\">Strg</span></span>+C &amp; los.</p>\n"
        "<p id=\"par_id2\">zweimal</p><p id=\"par_id2\">zweimal</p></body></html>");
  write(en / "text/shared/only_en.html", "<p id=\"par_id9\">No German page.</p>");
  const auto docs = libreoffice_documents(en, de);
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].id == "text/swriter/guide/insert.html");
  std::set<std::pair<std::string, std::string>> got;
  for (const Unit& u : docs[0].units) got.insert({u.en, u.de});
  CHECK(got == std::set<std::pair<std::string, std::string>>{
                   {"Inserting Graphics", "Grafiken einfügen"},
                   {"Select the file. In the File type box you can restrict the selection.", "Wählen Sie eine Datei. Im Feld Dateityp lässt sich die Auswahl beschränken."},
                   {"Press Ctrl+C & go.", "Drücken Sie Strg+C & los."}});
  CHECK(html_text("a&#228;&#x00FC;&nbsp;b<br/>c") == "aäü b c");
}

TEST_CASE("ende: the split is by document, without a held-out side in training, whatever the order") {
  std::vector<Document> docs;
  for (int d = 0; d < 600; ++d) {
    Document doc{d % 2 ? "ddtp" : "libreoffice", "doc" + std::to_string(d), {}};
    for (int u = 0; u < 4; ++u)
      doc.units.push_back({"Sentence number " + std::to_string(d * 10 + u) + " here.", "Satz Nummer " + std::to_string(d * 10 + u) + " hier."});
    doc.units.push_back({"Shared sentence " + std::to_string(d % 50) + " here.", "Geteilter Satz " + std::to_string(d % 50) + " hier."});
    doc.units.push_back({"Close the window.", "Schließen Sie das Fenster."});  // in every document: one pair, in one split
    doc.units.push_back({"Cancel.", "Abbrechen Nummer " + std::to_string(d) + "."});  // one English side, 600 German ones
    docs.push_back(doc);
  }
  const Corpus c = make_corpus(docs);
  CHECK(c.test.size() > 10);
  CHECK(c.validation.size() > 10);
  std::map<std::uint32_t, int> split_of;
  std::set<std::string> held;
  const std::vector<CorpusPair>* splits[] = {&c.train, &c.validation, &c.test};
  for (int s = 0; s < 3; ++s)
    for (const CorpusPair& p : *splits[s]) {
      const auto [it, fresh] = split_of.emplace(p.document, s);
      CHECK(it->second == s);  // a document is in one split
      if (s > 0) held.insert(p.en), held.insert(p.de);
    }
  for (const CorpusPair& p : c.train) CHECK((!held.count(p.en) && !held.count(p.de)));
  std::size_t close = 0;
  for (int s = 0; s < 3; ++s)
    for (const CorpusPair& p : *splits[s]) close += p.en == "Close the window.";
  CHECK(close == 1);
  std::size_t total = 0, leaked = 0, dup = 0;
  for (const SourceCount& n : c.counts) total += n.train + n.validation + n.test, leaked += n.leaked, dup += n.duplicates;
  CHECK(total == c.train.size() + c.validation.size() + c.test.size());
  CHECK(dup == 599 + 550);
  CHECK(leaked > 0);
  // Reversed input: the same corpus.
  std::reverse(docs.begin(), docs.end());
  const Corpus r = make_corpus(docs);
  REQUIRE(r.train.size() == c.train.size());
  for (std::size_t i = 0; i < r.train.size(); ++i) CHECK(r.train[i].en == c.train[i].en);
  // Written as TSV, whole.
  write_corpus(c, scratch("ende/corpus"));
  std::ifstream in(scratch("ende/corpus/test.tsv"));
  std::string line;
  std::size_t lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    CHECK(std::count(line.begin(), line.end(), '\t') == 2);
  }
  CHECK(lines == c.test.size());
  CHECK_THAT(count_table(c), Catch::Matchers::Contains("libreoffice"));
}

TEST_CASE("ende: catalogues in ISO-8859-1 and in UTF-8 both come out as UTF-8, what cannot be converted is dropped and counted") {
  const fs::path root = scratch("ende/charsets");
  // The same messages, once in each charset (\xfc \xdf: ü ß in ISO-8859-1).
  write_mo(root / "latin1/usr/share/locale/de/LC_MESSAGES/a2ps.mo", {{"Invalid argument", "Ung\xfcltiges Argument"}, {"Street", "Stra\xdf" "e"}},
           "ISO-8859-1");
  write_mo(root / "utf8/usr/share/locale/de/LC_MESSAGES/a2ps.mo", {{"Invalid argument", "Ungültiges Argument"}, {"Street", "Straße"}});
  for (const char* which : {"latin1", "utf8"}) {
    const auto docs = gettext_documents(root / which, "a2ps");
    REQUIRE(docs.size() == 1);
    std::map<std::string, std::string> got;
    for (const Unit& u : docs[0].units) got[u.en] = u.de;
    CHECK(got == std::map<std::string, std::string>{{"Invalid argument", "Ungültiges Argument"}, {"Street", "Straße"}});
    CHECK(docs[0].unconvertible == 0);
  }
  // A catalogue that says UTF-8 but holds Latin-1 bytes, one whose charset iconv does not know, a
  // msgid that is not UTF-8: those messages are dropped and counted; ASCII passes in any charset.
  write_mo(root / "liar/usr/share/locale/de/LC_MESSAGES/x.mo", {{"Invalid argument", "Ung\xfcltiges Argument"}, {"File", "Datei"}});
  write_mo(root / "unknown/usr/share/locale/de/LC_MESSAGES/x.mo", {{"Invalid argument", "Ung\xfcltiges Argument"}, {"File", "Datei"}}, "CHARSET");
  write_mo(root / "badid/usr/share/locale/de/LC_MESSAGES/x.mo", {{"Caf\xe9", "Caf\xe9"}, {"File", "Datei"}}, "ISO-8859-1");
  for (const char* which : {"liar", "unknown", "badid"}) {
    const auto docs = gettext_documents(root / which, "x");
    REQUIRE(docs.size() == 1);
    REQUIRE(docs[0].units.size() == 1);
    CHECK(docs[0].units[0].de == "Datei");
    CHECK(docs[0].unconvertible == 1);
  }
  // The corpus counts them, drops any unit that is not UTF-8 whichever reader made it, and is
  // written only when every side is UTF-8 text.
  std::vector<Document> docs = gettext_documents(root / "liar", "x");
  docs.push_back({"ddtp", "p", {{"A broken description.", "Eine kaputte \xff Beschreibung."}, {"The file is open.", "Die Datei ist offen."}}});
  const Corpus c = make_corpus(docs);
  std::size_t encoding = 0;
  for (const SourceCount& n : c.counts) encoding += n.encoding;
  CHECK(encoding == 2);
  for (const auto* split : {&c.train, &c.validation, &c.test})
    for (const CorpusPair& p : *split) CHECK((p.de.find('\xff') == std::string::npos && p.de.find('\xfc') == std::string::npos));
  CHECK_THAT(count_table(c), Catch::Matchers::Contains("encoding"));
  Corpus bad = c;
  bad.train.push_back({"Invalid argument", "Ung\xfcltiges Argument", 0});
  CHECK_THROWS_WITH(write_corpus(bad, root / "out"), Catch::Matchers::Contains("not one line of UTF-8 text") && Catch::Matchers::Contains("nothing written"));
  CHECK_FALSE(fs::exists(root / "out" / "train.tsv"));
}

namespace {
std::chrono::steady_clock::time_point g_stop_at;
bool stop_soon() { return std::chrono::steady_clock::now() >= g_stop_at; }
bool never() { return false; }
}  // namespace

TEST_CASE("ende: a stop (Ctrl-C) ends a running program and the pipeline at once, not when they finish") {
  g_stop_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  set_stop_check(stop_soon);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(run_program({"sleep", "600"}), Catch::Matchers::Contains("interrupted"));
  g_stop_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  CHECK_THROWS_WITH(run_pipeline({"sleep", "600"}, {"cat"}), Catch::Matchers::Contains("interrupted"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120));  // the programs would run 600 s: the stop ended them
  CHECK_THROWS_WITH(throw_if_stopped(), Catch::Matchers::Contains("interrupted"));
  set_stop_check(never);
  CHECK_NOTHROW(throw_if_stopped());
  CHECK(run_program({"true"}).status == 0);
  set_stop_check(nullptr);
}

TEST_CASE("ende: programs run without a shell, and a failure says so on one line") {
  const Ran r = run_program({"printf", "%s|", "a b", "$(echo x); rm -rf /"});
  CHECK(r.status == 0);
  CHECK(r.output == "a b|$(echo x); rm -rf /|");
  CHECK_THROWS_WITH(run_checked({"false"}, "false"), Catch::Matchers::Contains("false failed (exit 1)"));
  CHECK_THROWS_AS(run_program({"/nonexistent/program"}), ctgrad::data::data_error);
}

TEST_CASE("ende: gettext catalogues give one document per package and catalogue, accelerators removed") {
  CHECK(strip_accelerators("_Save As") == "Save As");
  CHECK(strip_accelerators("Speichern _unter") == "Speichern unter");
  CHECK(strip_accelerators("&File && more &amp; file_name") == "File & more &amp; file_name");
  CHECK(strip_accelerators("Da&tei") == "Datei");
  const fs::path dir = scratch("ende/catalogues/coreutils/usr/share/locale/de/LC_MESSAGES");
  write_mo(dir / "coreutils.mo", {{"_Open the file.", "Datei _öffnen."},
                                  {std::string("menu\x04Quit"), "Beenden"},
                                  {std::string("%d file\0%d files", 16), std::string("%d Datei\0%d Dateien", 18)},
                                  {"Usage: ls\n  -a  all", "Aufruf: ls\n  -a  alle"}});
  const auto docs = gettext_documents(scratch("ende/catalogues/coreutils"), "coreutils");
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].source == "gettext");
  CHECK(docs[0].id == "coreutils/coreutils");
  std::set<std::pair<std::string, std::string>> got;
  for (const Unit& u : docs[0].units) got.insert({u.en, u.de});
  CHECK(got == std::set<std::pair<std::string, std::string>>{{"Open the file.", "Datei öffnen."}, {"Quit", "Beenden"}, {"%d file", "%d Datei"}});
  CHECK(gettext_documents(scratch("ende/no such folder"), "x").empty());
}

TEST_CASE("ende: a pipeline joins two programs without a shell") {
  const Ran r = run_pipeline({"printf", "%s\\n", "b;", "a|"}, {"sort"});
  CHECK(r.status == 0);
  CHECK(r.output == "a|\nb;\n");
  CHECK(run_pipeline({"false"}, {"cat"}).status == 1);
  std::string seen;
  const Ran s = run_program({"printf", "x%.0s", "1", "2", "3"}, {}, [&](std::string_view c) { seen += c; });
  CHECK(seen == "xxx");
  CHECK(s.status == 0);
}

// What `ctgrad translate` keeps of a line: placeholders, markup and characters the vocabulary
// lacks, put back where they were around the translated text.
TEST_CASE("ende: a line cut around its placeholders, markup and unknown characters, and joined again") {
  auto unknown = [](std::string_view c) { return c == "\xe2\x98\x83"; };  // U+2603, the snowman
  const std::string line = "Press <b class=\"k\">%1$s</b> to save \xe2\x98\x83\xe2\x98\x83 the file.";
  const KeptSpans k = cut_around_kept(line, unknown);
  CHECK(k.kept == std::vector<std::string>{"<b class=\"k\">%1$s</b>", "\xe2\x98\x83\xe2\x98\x83"});  // adjacent ones as one
  CHECK(k.text == std::vector<std::string>{"Press ", " to save ", " the file."});
  CHECK(cores_to_translate(k) == std::vector<std::string>{"Press", "to save", "the file."});
  const std::map<std::string, std::string> de{{"Press", "Drücken"}, {"to save", "zum Speichern"}, {"the file.", "die Datei."}};
  CHECK(join_around(k, [&](const std::string& s) { return de.at(s); }) ==
        "Drücken <b class=\"k\">%1$s</b> zum Speichern \xe2\x98\x83\xe2\x98\x83 die Datei.");
  const KeptSpans plain = cut_around_kept("No placeholders here.", unknown);
  CHECK(plain.kept.empty());
  CHECK(plain.text == std::vector<std::string>{"No placeholders here."});
  const KeptSpans only = cut_around_kept("%s", unknown);  // nothing to translate
  CHECK(cores_to_translate(only).empty());
  CHECK(cores_to_translate(cut_around_kept("%1$s \xe2\x80\x93 %2$s \xc2\xbb", unknown)).empty());  // a dash and a guillemet: punctuation, copied
  CHECK(cores_to_translate(cut_around_kept("%s \xc3\x9c" "ber", unknown)) == std::vector<std::string>{"\xc3\x9c" "ber"});  // a letter past ASCII
  CHECK(join_around(only, [](const std::string&) -> std::string { throw std::logic_error("nothing to translate"); }) == "%s");
  CHECK(utf8_chars("a\xc3\xa4\xff") == std::vector<std::string_view>{"a", "\xc3\xa4", "\xff"});  // an invalid byte alone
  CHECK(utf8_chars("\xe2\x98") == std::vector<std::string_view>{"\xe2", "\x98"});              // a cut character
}
