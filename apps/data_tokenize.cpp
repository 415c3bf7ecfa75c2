// ctgrad data tokenize --data PATH --out DIR (--tokenizer RUN|FILE | --vocab N [--model bpe|unigram] | --chars)
//                      [--text-field F] [--val-fraction F] [--shard-tokens N] [--overwrite]
// A corpus of any size into token shards (data/token_shards.hpp) that `ctgrad train gpt|llama
// --set data=DIR` reads a window at a time. The data is read twice: first every document is checked (so a
// bad byte anywhere stops the command before it writes anything) and counted, then tokenized in
// parallel and written shard by shard, with a progress line. Interrupted (Ctrl-C, a kill), the same
// command resumes after the last whole shard of each split.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>
#include <oneapi/tbb/parallel_for.h>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/data/text_source.hpp>
#include <ctgrad/data/token_shards.hpp>
#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/folder_lock.hpp>
#include <ctgrad/training/trainer.hpp>

#include "option_text.hpp"
#include "task.hpp"
#include "tasks/lm_data.hpp"

namespace ctgrad::cli {

namespace {
namespace fs = std::filesystem;
constexpr const char* kUsage =
    "usage: ctgrad data tokenize --data PATH --out DIR (--tokenizer RUN|FILE | --vocab N [--model bpe|unigram] | --chars) [--text-field F] "
    "[--val-fraction F] [--shard-tokens N] [--overwrite]";
constexpr std::size_t kSampleBytes = std::size_t(100) << 20;  // text a new tokenizer learns from

std::string mb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MB", bytes / 1e6);
  return b;
}

std::string duration(double s) {
  char b[32];
  if (s < 60) std::snprintf(b, sizeof b, "%.0fs", s);
  else if (s < 3600) std::snprintf(b, sizeof b, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(b, sizeof b, "%dh%02dm", int(s) / 3600, int(s) / 60 % 60);
  return b;
}

// What the shards depend on: the files (path, size, time), the options and the tokenizer. A folder
// whose tokenize.json says otherwise is not resumed.
nlohmann::json settings(const std::string& spec, const std::vector<fs::path>& files, const std::string& field, double val_fraction,
                        std::uint64_t shard_tokens, std::uint64_t vocab_hash) {
  nlohmann::json f = nlohmann::json::array();
  for (const fs::path& p : files) {
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    const auto time = fs::last_write_time(p, ec).time_since_epoch().count();
    f.push_back({p.string(), std::int64_t(size), std::int64_t(time)});
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(vocab_hash));
  return {{"data", spec}, {"files", f}, {"text_field", field}, {"val_fraction", val_fraction}, {"shard_tokens", shard_tokens}, {"vocab_hash", hash}};
}

// The tokenizer file --tokenizer names: a file, or a run folder's tokenizer.
fs::path tokenizer_file(const fs::path& given) {
  std::error_code ec;
  if (fs::is_regular_file(given, ec)) {
    if (given.extension() != ".model" && given.extension() != ".json")
      throw config_error("--tokenizer " + training::printable(given.string()) + ": a SentencePiece .model, a character tokenizer's .json, or a run folder");
    return given;
  }
  if (!fs::is_directory(given, ec)) throw config_error("--tokenizer " + training::printable(given.string()) + ": no such file or run folder");
  const bool sp = fs::is_regular_file(given / "tokenizer.model", ec), ch = fs::is_regular_file(given / "tokenizer.json", ec);
  if (sp == ch)
    throw config_error("--tokenizer " + training::printable(given.string()) + (sp ? " holds tokenizer.model and tokenizer.json: name the file" : " holds no tokenizer.model or tokenizer.json"));
  return given / (sp ? "tokenizer.model" : "tokenizer.json");
}

struct Interrupted {};

bool is_ours(const std::string& name) {
  return name == "tokenize.json" || name == "tokenizer.model" || name == "tokenizer.json" || name == ".lock" ||
         ((name.starts_with("train_") || name.starts_with("val_")) && name.ends_with(".bin"));
}
int tokenize(const std::vector<std::string>& rest);
}  // namespace

// Bad data is bad input (exit 2, one line); Ctrl-C keeps the whole shards written (exit 130).
int data_tokenize_command(const std::vector<std::string>& rest) {
  training::install_interrupt_handlers();
  try {
    return tokenize(rest);
  } catch (const data::data_error& e) {
    throw config_error(message_of(e));
  } catch (const Interrupted&) {
    std::fprintf(stderr, "\nctgrad: interrupted: the whole shards written are kept; the same command resumes\n");
    return 130;
  }
}

namespace {
int tokenize(const std::vector<std::string>& rest) {
  std::string spec, text_field = "text", model = "bpe";
  fs::path out, tokenizer_given;
  std::int64_t vocab = 0, shard_tokens = 100'000'000;
  double val_fraction = 0.01;
  bool overwrite = false, chars = false;
  std::set<std::string> given;
  for (std::size_t i = 2; i < rest.size(); ++i) {
    const std::string& o = rest[i];
    if (o == "--help" || o == "-h") return std::printf("%s\n", kUsage), 0;
    if (o.rfind("--", 0) == 0 && !given.insert(o).second) throw config_error(training::printable(o) + " is given twice");
    auto value = [&]() -> std::string {
      if (i + 1 >= rest.size()) throw config_error(o + " needs a value");
      return one_line(o, rest[++i]);
    };
    if (o == "--data") spec = value();
    else if (o == "--out") out = value();
    else if (o == "--tokenizer") tokenizer_given = value();
    else if (o == "--vocab") vocab = training::parse_integer(value(), "--vocab", {.min = 16, .max = 1 << 20});
    else if (o == "--model") {
      model = value();
      if (model != "bpe" && model != "unigram") throw config_error("--model " + training::printable(model) + ": bpe or unigram");
    } else if (o == "--chars") chars = true;
    else if (o == "--text-field") text_field = value();
    else if (o == "--val-fraction") val_fraction = training::parse_real(value(), "--val-fraction", {.min = 0, .max = 0.5});
    else if (o == "--shard-tokens") shard_tokens = training::parse_integer(value(), "--shard-tokens", {.min = 1, .max = std::int64_t(1) << 40});
    else if (o == "--overwrite") overwrite = true;
    else throw config_error("unknown option '" + training::printable(o) + "' for ctgrad data tokenize (" + kUsage + ")");
  }
  if (spec.empty() || out.empty()) throw config_error(kUsage);
  if (int(!tokenizer_given.empty()) + int(vocab > 0) + int(chars) != 1) throw config_error("give one of --tokenizer, --vocab N and --chars (" + std::string(kUsage) + ")");
  if (given.count("--model") && vocab == 0) throw config_error("--model goes with --vocab (a tokenizer to train)");

  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const data::TextSourceOptions source{.text_field = text_field};
  // Pass 1: every document checked and counted before anything is written.
  const std::vector<fs::path> files = data::text_files(spec);
  std::uint64_t documents = 0, bytes = 0;
  data::for_each_document(spec, source, [&](data::Document&& d) {
    if (training::interrupted()) throw Interrupted{};
    ++documents, bytes += d.text.size();
  });
  if (documents == 0) throw data::data_error("ctgrad: data " + spec + " has no text (its files are empty)");
  std::printf("%s: %zu files, %llu documents, %s of text, checked in %.1f s\n", training::printable(spec).c_str(), files.size(), (unsigned long long)documents,
              mb(double(bytes)).c_str(), seconds());

  // The output folder: new, empty, or shards of this tokenization (resumed) or of another (--overwrite).
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec)) && !fs::is_directory(fs::symlink_status(out, ec)))
    throw config_error("--out " + training::printable(out.string()) + " is not a folder");
  fs::create_directories(out, ec);
  if (!fs::is_directory(out, ec)) throw config_error("--out " + training::printable(out.string()) + ": cannot make the folder");
  for (const auto& e : fs::directory_iterator(out, ec))
    if (!is_ours(e.path().filename().string()) && !e.path().filename().string().starts_with("."))
      throw config_error("--out " + training::printable(out.string()) + " holds " + training::printable(e.path().filename().string()) +
                         ", not a token shard: give a new or empty folder");
  const training::FolderLock lock(out, ".lock", "the token-shard folder", "another ctgrad data tokenize");
  const std::string where = "--out " + training::printable(out.string());
  const fs::path manifest_file = out / "tokenize.json";
  nlohmann::json manifest;  // null: none (a new folder)
  if (fs::exists(fs::symlink_status(manifest_file, ec))) {
    if (!fs::is_regular_file(fs::symlink_status(manifest_file, ec))) throw config_error(where + ": its tokenize.json is not a file");
    std::ifstream in(manifest_file);
    manifest = nlohmann::json::parse(in, nullptr, false);
    const bool usable = !manifest.is_discarded() && manifest.is_object() && manifest.contains("settings") && manifest["settings"].is_object() &&
                        manifest.contains("complete") && manifest["complete"].is_boolean() && manifest.contains("tokenizer") &&
                        (manifest["tokenizer"] == "tokenizer.model" || manifest["tokenizer"] == "tokenizer.json") &&
                        fs::is_regular_file(out / manifest["tokenizer"].get<std::string>(), ec);
    if (!usable && !overwrite) throw config_error(where + ": its tokenize.json is damaged or its tokenizer is missing: add --overwrite to start again");
    if (!usable) manifest = nlohmann::json();
  } else if (!overwrite && (!data::shard_files(out, "train").empty() || !data::shard_files(out, "val").empty())) {
    throw config_error(where + " holds shards but no tokenize.json: add --overwrite to replace them");
  }
  auto clear = [&] {  // the folder's shards, manifest and tokenizer (nothing else is in it: checked above)
    for (const auto& e : fs::directory_iterator(out))
      if (const std::string n = e.path().filename().string(); is_ours(n) && n != ".lock") fs::remove(e.path());
    manifest = nlohmann::json();
  };

  // What the tokenizer is to be: a given file (checked now), or one trained with these options.
  fs::path given_file;
  nlohmann::json tokenizer_source;
  if (!tokenizer_given.empty()) {
    given_file = tokenizer_file(tokenizer_given);
    (void)load_tokenizer(given_file);  // a file that does not load is refused before anything changes
    char h[17];
    std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(data::file_xxh3(given_file)));
    tokenizer_source = {{"file_xxh3", h}};
  } else if (chars) {
    tokenizer_source = "chars";
  } else {
    tokenizer_source = {{"vocab", vocab}, {"model", model}};
  }
  const nlohmann::json want_base = settings(spec, files, text_field, val_fraction, std::uint64_t(shard_tokens), 0);
  auto same_run = [&](const nlohmann::json& m) {  // everything but the tokenizer's hash
    nlohmann::json a = m["settings"], b = want_base;
    a.erase("vocab_hash"), b.erase("vocab_hash");
    return a.value("tokenizer_source", nlohmann::json()) == tokenizer_source && (a.erase("tokenizer_source"), a == b);
  };
  if (!manifest.is_null() && !overwrite) {
    if (!same_run(manifest))
      throw config_error(where + " holds the shards of other data or settings" +
                         (manifest["settings"].value("files", nlohmann::json()) != want_base["files"] ? " (the data's files changed)" : "") +
                         ": add --overwrite to replace them");
    if (manifest["complete"].get<bool>()) {
      std::printf("%s already holds these shards, complete: nothing to do\n", training::printable(out.string()).c_str());
      return 0;
    }
  }
  if (overwrite) manifest = nlohmann::json();

  // The tokenizer: kept from an unfinished run in this folder, copied in, or trained on a sample
  // (under another name until it is made: an --overwrite that fails keeps the old folder).
  std::unique_ptr<data::Tokenizer> tok;
  fs::path tok_file;
  if (!manifest.is_null()) {
    tok_file = out / manifest["tokenizer"].get<std::string>();
    tok = load_tokenizer(tok_file);
  } else if (!given_file.empty()) {
    std::ifstream in(given_file, std::ios::binary);
    const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    clear();
    tok_file = out / (given_file.extension() == ".json" ? "tokenizer.json" : "tokenizer.model");
    checkpoint::write_atomically(tok_file, b);
    tok = load_tokenizer(tok_file);
  } else {
    std::string sample;
    std::size_t taken = 0;
    try {
      data::for_each_document(spec, source, [&](data::Document&& d) {
        if (data::held_out(d.text, val_fraction)) return;
        sample += d.text, ++taken;
        if (!sample.ends_with('\n')) sample += '\n';
        if (sample.size() >= kSampleBytes) throw std::range_error("enough");
      });
    } catch (const std::range_error&) {
    }
    if (sample.empty()) throw data::data_error("ctgrad: data " + spec + " has no training document to learn a tokenizer from (all held out)");
    std::printf("training a %s tokenizer on %s of %zu training documents...\n", chars ? "character" : model.c_str(), mb(double(sample.size())).c_str(), taken);
    std::fflush(stdout);
    if (chars) {
      tok = std::make_unique<data::CharTokenizer>(data::CharTokenizer::train(sample, true));
      clear();
      tok_file = out / "tokenizer.json";
      tok->save(tok_file);
    } else {
      const fs::path pending = out / ".tokenizer.pending.model";
      tok = std::make_unique<data::SentencePieceTokenizer>(data::SentencePieceTokenizer::train(
          sample, out / ".tokenizer.pending", {.vocab_size = std::int32_t(vocab), .model_type = model, .input_sentence_size = 2'000'000, .max_sentence_length = 1 << 16}));
      clear();
      tok_file = out / "tokenizer.model";
      fs::rename(pending, tok_file);
      tok = load_tokenizer(tok_file);
    }
  }
  const std::uint64_t vocab_hash = data::file_xxh3(tok_file);
  nlohmann::json want = want_base;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(vocab_hash));
  want["vocab_hash"] = hash, want["tokenizer_source"] = tokenizer_source;
  manifest = {{"format", "ctgrad token shards"}, {"version", data::kShardVersion}, {"complete", false}, {"tokenizer", tok_file.filename().string()}, {"settings", want}};
  checkpoint::write_atomically(manifest_file, manifest.dump(1));

  // Where each split resumes: past the documents its last whole shard accounts for.
  data::ShardHeader format;
  format.vocab_size = std::uint32_t(tok->vocab_size());
  format.id_bytes = format.vocab_size <= 65536 ? 2 : 4;
  format.vocab_hash = vocab_hash;
  if (const auto* sp = dynamic_cast<const data::SentencePieceTokenizer*>(tok.get())) format.separator = sp->eos_id();
  struct Split {
    std::string name;
    std::uint64_t resume = 0;
    std::optional<data::ShardWriter> writer;
  } splits[2] = {{"train"}, {"val"}};
  std::uint64_t kept_tokens = 0;
  for (Split& s : splits) {
    const auto have = data::shard_files(out, s.name);
    for (const fs::path& f : have) {
      const data::ShardHeader h = data::read_shard_header(f);
      if (h.vocab_hash != vocab_hash) throw data::data_error("ctgrad: token shard " + f.string() + " is of another tokenizer: add --overwrite to start again");
      s.resume = h.next_document, kept_tokens += h.tokens;
    }
    s.writer.emplace(out, s.name, have.size(), format, std::uint64_t(shard_tokens));
  }
  const std::uint64_t skip = std::min(splits[0].resume, splits[1].resume);
  if (kept_tokens > 0) std::printf("resuming: the shards written hold documents up to %llu of %llu\n", (unsigned long long)std::max(splits[0].resume, splits[1].resume), (unsigned long long)documents);

  // Pass 2: documents in batches of about 4 MB, encoded in parallel, written in reading order.
  const double t_start = seconds();
  std::uint64_t index = 0, done_bytes = 0, new_bytes = 0;
  std::vector<data::Document> batch;
  std::vector<std::uint64_t> batch_index;
  std::size_t batch_bytes = 0;
  double last_print = 0;
  auto progress = [&](bool final) {
    const double el = seconds() - t_start, now = seconds();
    if (!final && now - last_print < 0.5) return;
    last_print = now;
    const double rate = el > 0 ? double(new_bytes) / el : 0, frac = std::min(1.0, double(done_bytes) / double(bytes));
    const int filled = int(frac * 24);
    std::fprintf(stderr, "\r[%s%s] %s of %s  %.1f MB/s  %llu tokens  ETA %s   ", std::string(std::size_t(filled), '#').c_str(),
                 std::string(std::size_t(24 - filled), '.').c_str(), mb(double(done_bytes)).c_str(), mb(double(bytes)).c_str(), rate / 1e6,
                 (unsigned long long)(kept_tokens + splits[0].writer->tokens() + splits[1].writer->tokens()),
                 rate > 0 ? duration(double(bytes - done_bytes) / rate).c_str() : "?");
    if (final) std::fputc('\n', stderr);
  };
  auto flush = [&] {
    std::vector<std::vector<std::int32_t>> ids(batch.size());
    std::vector<std::string> failed(batch.size());
    tbb::parallel_for(std::size_t(0), batch.size(), [&](std::size_t i) {
      try {
        ids[i] = tok->encode(batch[i].text);
      } catch (const data::data_error& e) {
        failed[i] = e.what();
      }
    });
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (!failed[i].empty())
        throw data::data_error("ctgrad: data " + batch[i].source + ": the tokenizer cannot encode it (" + failed[i].substr(failed[i].rfind("ctgrad: ", 0) == 0 ? 8 : 0) +
                               "; a character tokenizer without an unknown id, a KJV run's: use --chars)");
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Split& s = splits[data::held_out(batch[i].text, val_fraction)];
      if (batch_index[i] >= s.resume) s.writer->add(ids[i], batch_index[i]);
      done_bytes += batch[i].text.size();
    }
    new_bytes += batch_bytes;
    batch.clear(), batch_index.clear(), batch_bytes = 0;
    progress(false);
  };
  data::for_each_document(spec, source, [&](data::Document&& d) {
    if (training::interrupted()) throw Interrupted{};
    const std::uint64_t i = index++;
    if (i < skip) {
      done_bytes += d.text.size();
      return;
    }
    batch_bytes += d.text.size();
    batch.push_back(std::move(d)), batch_index.push_back(i);
    if (batch_bytes >= (std::size_t(4) << 20)) flush();
  });
  flush();
  if (index != documents) throw data::data_error("ctgrad: data " + spec + " changed while it was read (" + std::to_string(index) + " documents, first " + std::to_string(documents) + ")");
  for (Split& s : splits) s.writer->finish(index);
  progress(true);
  manifest["complete"] = true;
  manifest["train"] = {{"shards", splits[0].writer->shards()}};
  manifest["val"] = {{"shards", splits[1].writer->shards()}};
  checkpoint::write_atomically(manifest_file, manifest.dump(1));
  const double el = seconds() - t_start;
  std::printf("wrote %zu train and %zu val shards to %s (%s tokenizer, %d tokens, %u-byte ids): %s tokenized in %.1f s, %.1f MB/s\n", splits[0].writer->shards(),
              splits[1].writer->shards(), training::printable(out.string()).c_str(), tok->kind().c_str(), tok->vocab_size(), format.id_bytes,
              mb(double(new_bytes)).c_str(), el, el > 0 ? double(new_bytes) / el / 1e6 : 0.0);
  return 0;
}
}  // namespace

}  // namespace ctgrad::cli
