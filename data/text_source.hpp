// A user's text: files, folders, globs and JSON Lines, plain, gzip or zstd, read as they stream and
// checked as they are read (UTF-8, no binary, bounded lines). Every error is a data_error of one line
// naming the file and the line and byte where it went wrong.
//
//   data::for_each_document("notes/", {}, [](data::Document&& d) { ... });   // each .txt/.md file
//   auto c = data::read_corpus("books.jsonl.zst", {.text_field = "body"});  // split by document hash
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <ctgrad/data/pairs.hpp>
#include <ctgrad/data/text.hpp>

namespace ctgrad::data {

struct TextSourceOptions {
  std::string text_field = "text";                 // the field of a JSON Lines record holding its text
  std::size_t max_line_bytes = std::size_t(8) << 20;  // a longer line is refused (not text, or one record too many)
  // A plain text file is one document; a larger one is read in parts cut at line breaks, each a document.
  std::size_t max_document_bytes = std::size_t(64) << 20;
  // read_corpus: more text than this is refused (0: no bound), naming the way on (token shards).
  std::size_t max_total_bytes = 0;
};

struct Document {
  std::string source;  // "notes/a.txt", "books.jsonl:17" (file and line of a record)
  std::string text;    // UTF-8; line breaks "\n" (a "\r\n" is read as "\n", a leading BOM dropped)
};

// The files a spec names, in the order they are read: a file; a folder's .txt, .md and .jsonl files
// (also .gz or .zst), recursively, by path, hidden names skipped; or a glob (its matches, sorted, each
// a file or folder as above). Refused: nothing found, a FIFO, device or socket.
std::vector<std::filesystem::path> text_files(const std::string& spec);

// Calls `each` with every document of the spec's files in order: a .jsonl file gives one per line
// (the line's JSON object's text_field; blank lines skipped), any other file its whole text.
// Compression is read from the bytes (gzip, zstd), not the name. Returns the documents read.
std::size_t for_each_document(const std::string& spec, const TextSourceOptions& o, const std::function<void(Document&&)>& each);

// Whether a document belongs to the held-out split: a hash of its text (XXH3) below `fraction` of
// the hash range, so a document's side never depends on what else is read (and duplicates share one).
bool held_out(const std::string& text, double fraction);

struct Corpus {
  std::vector<std::string> train, validation;  // documents, in reading order
  std::string split;  // how validation was chosen, for the command's first lines
};
// A corpus in memory: validation is `val_spec`'s documents when given, else the documents held_out()
// chooses; when that leaves either side empty (one file, a few documents), the last `fraction` of
// every document instead (cut at a line break). An empty corpus is refused.
Corpus read_corpus(const std::string& spec, const std::string& val_spec, double fraction, const TextSourceOptions& o = {});

// The lines of one file (plain, gzip or zstd), checked as for_each_document's: fn(line, its number from 1).
void for_each_line(const std::filesystem::path& file, const TextSourceOptions& o, const std::function<void(std::string& line, std::int64_t number)>& fn);

// Sentence pairs from a user's files: "pairs:SRC,TGT" (two line-aligned files, line n of each a
// pair); a .jsonl file (two string fields of each line's object, or of its "translation" object,
// as Hugging Face's datasets write them); any other file as TSV (source, a tab, target); a glob of
// such files. Blank lines are skipped; a line with a side missing, a third field, or files of
// different lengths are refused naming the file and line.
struct PairOptions {
  std::string source_field = "en", target_field = "de";
  std::size_t max_line_bytes = std::size_t(1) << 20;
};
std::vector<SentencePair> read_pairs(const std::string& spec, const PairOptions& o = {});

// Labelled texts for classification: a .jsonl file (text_field, and label_field, a string or an
// integer); a .csv file (RFC 4180, a header row naming the columns text_field and label_field); or any
// other file as TSV (text, a tab, the label: the last field; a first line whose label is label_field
// is a header); or a glob of such files. Blank lines skipped; a missing text or label
// refused naming the file and line.
struct LabelledText {
  std::string text, label;
};
struct LabelOptions {
  std::string text_field = "text", label_field = "label";
  std::size_t max_line_bytes = std::size_t(1) << 20;
};
std::vector<LabelledText> read_labelled(const std::string& spec, const LabelOptions& o = {});

// A text's bytes that are not UTF-8: the offset of the first bad byte, or npos.
std::size_t invalid_utf8_at(std::string_view s);

}  // namespace ctgrad::data
