// The text a language model trains on (gpt, llama): the corpora ctgrad ships by name (kjv,
// austen), a user's files, folders, globs and JSON Lines (data/text_source.hpp), or a folder of
// token shards made by `ctgrad data tokenize` (data/token_shards.hpp), read a window at a time.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/text_source.hpp>
#include <ctgrad/data/token_shards.hpp>
#include <ctgrad/data/tokenizer.hpp>

#include "../task.hpp"

namespace ctgrad::cli {

// data, val_data, val_fraction, text_field: run keys, stated in a saved config only when set (a run
// on the default data saves what it saved before they existed). `named`: the named sources, for
// the help ("kjv (the King James Bible) or austen (...)").
void add_text_data_keys(Schema& s, const std::string& default_data, const std::string& named);
// Those with data=kjv, and span_documents: a language model's.
void add_lm_data_keys(Schema& s);
// The text a config's data, val_data, val_fraction and text_field name (data/text_source.hpp),
// bounded by the memory available; bad data is a config_error.
data::Corpus read_user_text(const Config& c);
// A run's or a shard folder's tokenizer file: tokenizer.json (characters) or a SentencePiece model.
std::unique_ptr<data::Tokenizer> load_tokenizer(const std::filesystem::path& file);

// A folder `ctgrad data tokenize` wrote: its tokenize.json names the tokenizer file beside the shards.
struct ShardFolder {
  std::filesystem::path dir, tokenizer;  // tokenizer: dir/tokenizer.model or dir/tokenizer.json
  std::uint64_t vocab_hash = 0;          // XXH3 of the tokenizer file, as in every shard's header
  std::size_t train_shards = 0, val_shards = 0;  // as tokenize.json counts them
};
// Whether `data` names a token-shard folder (a folder holding tokenize.json).
bool is_shard_folder(const std::string& data);
// The folder, refused (config_error naming it) while its tokenization is incomplete.
ShardFolder open_shard_folder(const std::filesystem::path& dir);

// A task's dependent defaults, preceded by this one: with data a shard folder and no tokenizer
// given, the tokenizer key names the folder's kind (bpe for tokenizer.model, else char).
std::function<void(Config&)> with_shard_tokenizer(std::function<void(Config&)> then);

// A text corpus in memory, as documents.
struct LmText {
  std::string name;   // "KJV Bible", "notes/"
  std::string split;  // how validation was chosen
  std::vector<std::string> train, validation;
};
// The config's data (not a shard folder); only its validation side unless `need_train`.
LmText read_lm_text(const Config& c, bool need_train);

// Token ids of one split: documents encoded into one stream in memory, or shards read from their files.
struct TokenSplit {
  std::vector<std::int32_t> ids;
  std::vector<std::size_t> starts;  // where each document starts in ids
  std::vector<data::ShardFile> shards;
  bool joined = false;  // span_documents: windows may run across documents
  std::vector<data::TokenPiece> pieces() const;
  std::uint64_t tokens() const;
};
// Encodes documents (SentencePiece in parallel, through the data cache); text the tokenizer cannot
// encode (a character tokenizer without an unknown id) is a config_error saying so.
TokenSplit encode_documents(const data::Tokenizer& tok, std::vector<std::string>&& docs, const data::DataCache& cache, bool joined);

}  // namespace ctgrad::cli
