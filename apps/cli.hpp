// The `ctgrad` command as a library: a program declares its own models and gets the whole command
// for them (train, eval, sample, ablate, help, check, resume, Ctrl-C, run folders, plots, mpirun)
// beside ctgrad's own main job (gpt; the other built-in models are plug-ins of the ctgrad binary).
//
//   #include <ctgrad/cli/cli.hpp>
//   int main(int argc, char** argv) { return ctgrad::cli::main(argc, argv, {ctgrad::cli::language_model(my_model())}); }
//
// Linked as ctgrad::cli (find_package(ctgrad)). examples/own_model/ is a whole project.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <ctgrad/graph/builder.hpp>

#include "task.hpp"

namespace ctgrad::cli {

// Runs the command with `models` added to the built-in ones (a name taken twice is refused).
int main(int argc, char** argv, std::vector<Task> models = {});

// A decoder-only language model: ids in, logits out. The command gives it the data (any text,
// token shards: docs/training.md), the tokenizer (characters or BPE), the loss (next-token cross
// entropy), AdamW with warm-up and cosine, validation, checkpoints and sampling (the whole window
// recomputed per token: no key/value cache needed).
struct LanguageModel {
  std::string name, summary;
  // The model's own config keys (sizes, architecture: --set key=value, ablate --grid key=...),
  // beside the command's: data, tokenizer, vocab, max_context, context, batch, steps, lr, ...
  std::function<void(Schema&)> keys = {};
  // The logits [Batch, Seq, vocab] of ids [Batch, Seq], declared with ctgrad's layers. `vocab` is the
  // vocabulary to predict; `max_context` the longest window it will be given.
  std::function<Value(Builder& g, Value ids, const Config& c, int vocab, int max_context)> logits;
  // Defaults the data and tokenizer need: 256 tokens (characters), 256 positions.
  int vocab = 256, max_context = 256;
};
Task language_model(LanguageModel m);

}  // namespace ctgrad::cli
