// The `ctgrad` command's plugin for one model family (flashlight's app plugins, in one struct): its
// config schema, its commands beyond train and eval, and how to open a session (a model bound to
// its data and run folder). The driver (apps/ctgrad.cpp) does everything else once: argument
// parsing, the config from --config, --set and the checkpoint with the same checks for every
// model, the run folder, resuming, the training loop (training/trainer.hpp), threads and seeds.
//
// A new model command is one file in apps/tasks/ that ends with
//   const bool registered = ctgrad::cli::register_task(my_task());
// and one line in apps/CMakeLists.txt.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/data/cache.hpp>
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/graph/planned_graph.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/optim/optimizer.hpp>
#include <ctgrad/training/config.hpp>
#include <ctgrad/training/trainer.hpp>

namespace ctgrad::pretrained {
struct HfModel;
}

namespace ctgrad::cli {

using training::Config;
using training::config_error;
using training::Role;
using training::Schema;

// A command of a model beyond train and eval ("sample", "translate", "fill-mask"), with its options.
struct Command {
  std::string name, help;
  Schema options;  // --name value; a flag key is a bare --name
};

// A command of one model that trains another task: `ctgrad finetune bert --task austen-novel` is
// `ctgrad train bert-finetune --set task=austen-novel`. Each of `keys` is also an option
// (--task X is --set task=X); everything else is the target's train command line.
struct TrainingCommand {
  std::string name, task, help;
  std::vector<std::string> keys;
};

// What a session is opened for.
struct Context {
  std::string command;            // "train", "eval", or one of the task's commands
  training::RunFolder folder;
  bool from_checkpoint = false;   // eval, the extra commands, train --resume
  std::filesystem::path pretrained;  // --from DIR: a Hugging Face model folder whose weights and tokenizer the model starts from
  int threads = 0;                // 0: all cores
  training::Shard shard;          // under mpirun: the part of each global batch this rank feeds
  training::Communicator* comm = nullptr;  // under mpirun: the ranks (validation is split over them)
  data::DataCache cache = data::DataCache::from_environment();  // trained tokenizers, encoded corpora
};

// Validation split over the ranks of a data-parallel run: batch k of an evaluation is this rank's
// when k % ranks == rank; sum() adds the ranks' partial sums. One process: every batch, no sum.
struct EvalShard {
  training::Communicator* comm = nullptr;
  bool mine(std::int64_t k) const { return !comm || k % comm->size() == comm->rank(); }
  void sum(std::span<double> v) const {
    if (comm) comm->allreduce_sum(v, "the validation sums");
  }
};

// A model bound to a config, its data and its run folder, for one command.
class Session {
 public:
  virtual ~Session() = default;
  virtual Executor<float>& model() = 0;
  virtual optim::Optimizer<float>& optimizer() = 0;
  // After the checkpoint is loaded (when there is one): tokenizers, data sets, batches. Printing
  // what was built (sizes, parameters) belongs here too.
  virtual void prepare() = 0;
  // Training: the loop's options and the run (feeding and validation).
  virtual training::LoopOptions loop() = 0;
  virtual training::Run run() = 0;
  // The names of the validation metrics run().validate reports, the one logged as the loss first:
  // `ctgrad ablate --metric` is checked against them before any run starts.
  virtual std::vector<std::string> metrics() const = 0;
  // What else goes into the checkpoint's metadata (the tokenizer file and its hash, ...).
  virtual checkpoint::Metadata metadata() { return {}; }
  // After training: the model shows what it learned (a sample, translations). Exit code.
  virtual int after_training(const training::Outcome&) { return 0; }
  // `ctgrad eval <model>` after the checkpoint is loaded, with the options of the task's "eval"
  // command when it declares one (empty otherwise). Exit code.
  virtual int eval(const Config& options) = 0;
  // One of the task's extra commands, with its parsed options. Exit code.
  virtual int command(const std::string& name, const Config& options);
};

struct Task {
  std::string name, summary;
  Schema schema;                  // the config of train and eval
  std::vector<Command> commands;  // beyond train; one named "eval" declares eval's options
  std::vector<TrainingCommand> training_commands;
  std::function<std::unique_ptr<Session>(const Config&, const Context&)> open;
  // Defaults that depend on other keys (the copy task trains without dropout), set on the config
  // before it is used, so that the checkpoint states them and a resumed run (or another rank) keeps them.
  std::function<void(Config&)> dependent_defaults = {};
  // Its training feeds Context::shard of each batch (and says Run::loss_terms when shards'
  // losses average over different counts): `mpirun -np N ctgrad train` is refused otherwise.
  bool data_parallel = false;
  // Config keys that name a folder the run reads (a pretrained run): `--run` may not be one of
  // them, so that --overwrite never deletes what the run was to read.
  std::vector<std::string> input_folders = {};
  // Extra checks of a config against the checkpoint's, beyond the keys' roles (a GPT may be
  // evaluated at a shorter context than it was trained at, not a longer one).
  std::function<void(const Config& config, const Config& saved, const Context&)> check_against_checkpoint = {};
  // Hugging Face model folders (pretrained/hf_model.hpp, docs/models/pretrained.md). from_hf: the
  // config keys and values a folder's model sets (its architecture, sizes and tokenizer; a
  // config_error when the folder holds another family); to_hf: the folder a run's config exports
  // as (a config_error naming what the family's Hugging Face class cannot express).
  std::function<std::vector<std::pair<std::string, std::string>>(const std::filesystem::path& dir, const pretrained::HfModel&)> from_hf = {};
  std::function<void(const Config&, const Context&, pretrained::HfModel&)> to_hf = {};
  // train --from: the parameters of the task's own head (a classifier on a pretrained encoder):
  // read when the folder has them at their shape, new otherwise; the folder's other head is then
  // left unread. eval --from reads every parameter.
  std::function<bool(std::string_view)> hf_head = {};
};

// A number as a config value, every digit kept (1e-05, not 0.000010).
std::string exact(double v);

// Which command reads a Hugging Face folder's family ("ctgrad finetune bert --from DIR"), for a
// refusal by another family's command.
std::string command_reading(const pretrained::HfModel& m);

bool register_task(Task task);
const std::vector<Task>& tasks();
// Drops the tasks registered after the first `count` (a plug-in that failed its checks after it loaded).
void forget_tasks_after(std::size_t count);

// Helpers for tasks.

template <class S>
std::unique_ptr<Session> open_session(const Config& c, const Context& ctx) {
  return std::make_unique<S>(c, ctx);
}

// The loop of a config with the keys steps, eval_every and clip; `lr` the learning rate of step s.
training::LoopOptions step_loop(const Config& c, std::function<double(std::int64_t)> lr, std::string unit, std::string items);

// What a checkpoint records of the run's tokenizer file: its name and its hash (file_hash).
checkpoint::Metadata tokenizer_metadata(const training::RunFolder& folder, const std::string& file = "tokenizer.model");

// Wall time since it was made, for the figures a command prints.
struct Stopwatch {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
};

// For Task::check_against_checkpoint: a run read at a longer context than it trained at would use
// untrained position embeddings.
void refuse_longer_context(const Config& c, const Config& saved, const Context& ctx);

// Keys of every model: the seeds (`seed` sets every stream; init_seed, data_seed, dropout_seed,
// -1: seed, set one) and `precision` (fp32 | bf16: the matmuls' operands, applied by the CLI).
void add_common_keys(Schema& s);
std::uint64_t init_seed(const Config& c);
std::uint64_t data_seed(const Config& c);
std::uint64_t dropout_seed(const Config& c);

// The hyperparameters of a frozen graph (Scope::hyper), as real config keys with the graph's
// defaults: `--set dropout=0.1` then reaches Program::set_hyper, and the ops using it check it.
template <class G>
void add_hyper_keys(Schema& s, const G& g, const std::vector<std::pair<std::string, double>>& defaults = {}) {
  for (int i = 0; i < g.size; ++i) {
    if (g[i].kind != NodeKind::hyper) continue;
    const std::string name(g.name(i));
    double v = g[i].hyper_default();
    for (const auto& [n, d] : defaults)
      if (n == name) v = d;
    if (!s.find(name)) s.real(name, v, {}, "hyperparameter of the model (checked by the ops using it)");
  }
}

// Program options from a config: threads, the init and dropout seeds, and every hyperparameter
// of the graph that is a config key.
Options program_options_named(const Config& c, int threads, std::span<const std::string_view> hyper_names);
template <class G>
Options program_options(const Config& c, int threads, const G& g) {
  std::vector<std::string_view> names;
  for (int i = 0; i < g.size; ++i)
    if (g[i].kind == NodeKind::hyper) names.push_back(g.name(i));
  return program_options_named(c, threads, names);
}

// The model a config describes, frozen and planned at run time (graph/planned_graph.hpp): built
// once per run, shared by its programs. A config the model function refuses (a shape error) is
// bad input, a config_error with the function's message.
std::shared_ptr<const PlannedGraph> plan_model(const std::function<Builder()>& build);

// Makes programs of one graph built from a config at run time (a model's training graph, its
// decoding graphs): the graph is frozen and planned at the first program made, then shared.
using ProgramMaker = std::function<std::unique_ptr<Executor<float>>(const Options&)>;
ProgramMaker program_maker(std::function<Builder()> build);
ProgramMaker program_maker(std::shared_ptr<const PlannedGraph> planned);

// Size keys, 0 meaning the preset's value (the help lists each preset's): "d_model", "layers",
// "d_ff", "vocab", "max_context" (the longest context the model reads: a learned position table's
// rows, the decoding caches' room). `presets`: name and value of each preset, for the help; a
// model whose presets give no vocab (or context) has no such key (its data fixes it).
struct PresetSizes {
  std::string name;
  int d_model, layers;
  int ff_mult;  // d_ff 0: ff_mult * d_model (gated, as SwiGLU: 2/3 of it, rounded up to 8)
  int vocab = 0, context = 0;
};
void add_size_keys(Schema& s, const std::vector<PresetSizes>& presets);
// The value of size key `key`, or the preset's when it is 0.
int size_or(const Config& c, const std::string& key, int preset);
// The feed-forward width: d_ff, or ff_mult d_model (gated: 2/3 of it, rounded up to 8).
int ff_width(const Config& c, int d_model, int ff_mult, bool gated);
// The architecture keys, with a model's defaults (its presets' choices); heads 0 is the preset's.
void add_arch_keys(Schema& s, const layers::Arch& defaults, bool tie = true, bool rope = false);
// "pre-norm LayerNorm, gelu_tanh, learned positions, tied output", for a training's first line.
std::string describe_arch(const layers::Arch& a, bool with_tie = true);
// The architecture keys add_arch_keys declares, as an Arch.
layers::Arch arch_of(const Config& c, bool tie);
// Refuses, naming the keys, heads that do not divide the width, kv_heads that do not divide the
// heads, a head width RoPE cannot pair.
void check_heads(int d_model, int heads, int kv_heads, bool rope);
// context (tokens per window) fitted to max_context (or the preset's) when not given; a context
// longer than the preset's raises max_context with it when that is not given.
std::function<void(Config&)> fit_context_to_model(std::function<int(const Config&)> preset_context);

// The memory this process can still use: the machine's available memory, bounded by a cgroup
// limit (a container) and by the address-space limit (ulimit -v) when they are set.
double available_bytes();

// From now on check_fits passes whatever the memory here: a study submitted to a cluster from a
// login node, whose runs the nodes' memory holds (each run checks again where it trains).
void judge_memory_elsewhere();

// Refuses (config_error) a config whose runtime dims would need more memory than the machine has,
// or overflow: the training plan of `model` at these symbol values (Batch, Seq, SeqKV, ...), plus
// `extra` bytes the task keeps per step (batches), against the memory available now. `what` says
// which keys set the dims ("batch 12 x context 64").
void check_fits(const Executor<float>& model, std::array<std::int64_t, kMaxSymbols> sym, double extra, const std::string& what);

// Data parallelism: the global batch of `rows` (set by `key`) must split into equal shards, so
// that each rank's dropout masks are the ones of its rows in a one-process run.
void check_shards(const Context& ctx, std::int64_t rows, const std::string& key);

// A library error's message without its "ctgrad: " prefix: the command's message prefix is its own.
std::string message_of(const std::exception& e);

// A list of names a run stores in its checkpoint's metadata under `key` (a classifier's labels,
// an image folder's classes): written as a JSON array, read back refusing anything but two or more
// strings (config_error naming the checkpoint).
std::string names_metadata(const std::vector<std::string>& names);
std::vector<std::string> names_from_checkpoint(const std::filesystem::path& checkpoint, const std::string& key);

// A 64-bit FNV-1a hash of a file's bytes, as hex: recorded in a checkpoint so that a tokenizer
// swapped or edited after training is refused, not silently used.
std::string file_hash(const std::filesystem::path& file);

// -log softmax(logits)[target] of one row of `vocab` logits, in double: a validation loss per
// token that label smoothing (part of the training loss) does not change.
double token_nll(const float* logits, int vocab, std::int32_t target);

// A pretrained run a fine-tuning starts from: its checkpoint (refused unless it is one of `model`),
// its config and its tokenizer (refused unless it is the one the checkpoint was trained with).
// `how` says how to make one ("ctgrad train bert --run DIR").
struct PretrainedRun {
  std::filesystem::path dir, tokenizer;
  std::string config_json, tokenizer_hash;
  std::unique_ptr<checkpoint::File> checkpoint;
  // Copies the tokenizer into `to`, atomically (do it last: a refused start leaves no file behind).
  void copy_tokenizer(const std::filesystem::path& to) const;
  // Copies, by name, the checkpoint's tensors into each parameter `take` accepts; a missing name
  // or another shape is a config_error naming it. Returns how many.
  int load_weights(Executor<float>& model, const std::function<bool(std::string_view)>& take, const std::string& shape_hint) const;
};
PretrainedRun open_pretrained(const std::filesystem::path& dir, const std::string& model, const std::string& how);

}  // namespace ctgrad::cli
