// Token shards: a corpus tokenized once (`ctgrad data tokenize`) and read a window at
// a time, so a corpus far larger than memory trains in a few hundred MB. The layout follows llm.c's
// .bin shards: a 256-byte header, then the ids, uint16 when the vocabulary fits and uint32 otherwise,
// little-endian, each document preceded by the tokenizer's end-of-text id (when it has one).
//
//   header: "CTGRADTK" | version u32 | id bytes u32 | tokens u64 | documents u64 | next document u64 |
//           vocabulary size u32 | separator i32 | vocabulary hash u64 (XXH3 of the tokenizer file) | zeros
//
// A shard is written under a temporary name and renamed when whole: a shard being written is never
// read as one. Its "next document" is the index (in the corpus's reading order) past every document of
// its split it or an earlier shard holds, so an interrupted run resumes after its last whole shard.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <ctgrad/data/text.hpp>

namespace ctgrad::data {

inline constexpr std::uint32_t kShardVersion = 1;
inline constexpr std::size_t kShardHeaderBytes = 256;

struct ShardHeader {
  std::uint32_t id_bytes = 2;
  std::uint64_t tokens = 0, documents = 0, next_document = 0;
  std::uint32_t vocab_size = 0;
  std::int32_t separator = -1;
  std::uint64_t vocab_hash = 0;
};

// XXH3-64 of a file's bytes: the vocabulary hash of a tokenizer file.
std::uint64_t file_xxh3(const std::filesystem::path& file);

// "train_000003.bin": shard `index` of a split ("train" or "val").
std::string shard_name(const std::string& split, std::size_t index);

// Writes one split's shards into a folder, starting at shard `first` (after the shards a resumed run keeps).
class ShardWriter {
 public:
  ShardWriter(std::filesystem::path dir, std::string split, std::size_t first, ShardHeader format, std::uint64_t shard_tokens);
  // A document (its ids, the separator put before them); `index` is its place in the reading order.
  void add(std::span<const std::int32_t> ids, std::uint64_t index);
  // Writes what is pending as a last (shorter) shard; `next_document` is where the reading ended.
  void finish(std::uint64_t next_document);
  std::size_t shards() const { return index_; }
  std::uint64_t tokens() const { return tokens_; }

 private:
  void flush(std::uint64_t next_document);
  std::filesystem::path dir_;
  std::string split_;
  std::size_t index_;
  ShardHeader format_;
  std::uint64_t shard_tokens_, tokens_ = 0, documents_ = 0;
  std::vector<unsigned char> pending_;
};

// One shard, read a window at a time with pread. (Not mapped: pages of a mapped file count in the
// process's resident memory, and the kernel maps a whole large folio, up to 2 MB, on each fault:
// 1.2 GB resident after 600 windows of an 8 GB corpus. Read, they stay in the page cache alone.)
// Checked on opening: magic number, version, id width, and that the file holds exactly the
// header's count of ids; a bad one is a data_error naming the file and what is wrong.
class ShardFile {
 public:
  explicit ShardFile(const std::filesystem::path& file);
  ShardFile(ShardFile&&) noexcept;
  ShardFile& operator=(ShardFile&&) = delete;
  ~ShardFile();
  const ShardHeader& header() const { return header_; }
  const std::filesystem::path& file() const { return file_; }
  // Ids [start, start + n) into out; a read error or a file cut short since it was opened throws.
  void read(std::uint64_t start, std::size_t n, std::int32_t* out) const;

 private:
  std::filesystem::path file_;
  ShardHeader header_;
  int fd_ = -1;
};

// Reads a shard file's header alone (for resuming and for listing), checked as above.
ShardHeader read_shard_header(const std::filesystem::path& file);

// The whole shards of a split in a folder, in order; shard numbers must run 0, 1, ... without a gap.
std::vector<std::filesystem::path> shard_files(const std::filesystem::path& dir, const std::string& split);

// Every shard of a split, opened and checked against each other and against `vocab_hash`, the
// tokenizer's (a shard of another vocabulary is refused, naming it).
std::vector<ShardFile> open_shards(const std::filesystem::path& dir, const std::string& split, std::uint64_t vocab_hash);

}  // namespace ctgrad::data
