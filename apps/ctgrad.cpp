// The ctgrad command:
//   ctgrad train <model> [--config file.json] [--set key=value ...] [--run DIR] [--resume | --overwrite] [--threads N]
//   ctgrad eval <model> [--run DIR] [--set key=value ...] [--threads N] [model's eval options]
//   ctgrad <command> <model> [--run DIR] [options]      a model's own commands: sample, translate, ...
//   ctgrad ablate <model> --grid key=a,b [--seeds N] ...  an ablation study (apps/ablate.cpp)
//   ctgrad average-checkpoints <model> --run DIR [--last K]  checkpoint averaging (apps/average.cpp)
//   ctgrad export --run DIR --to OUT                    a run as a Hugging Face model folder (apps/hf_folders.cpp)
//   ctgrad data tokenize|ende ...                       token shards, the EN-DE corpus (apps/data_*.cpp)
//   ctgrad help [<model>]                               models, commands, config keys and options
// The models are the tasks registered in apps/tasks/ (apps/task.hpp) and a program's own
// (ctgrad::cli::main, apps/cli.hpp). Exit codes: 0 done, 1 a
// runtime failure, 2 bad input (command line, config, run folder), 3 training diverged, 130
// interrupted (Ctrl-C or SIGTERM, after saving), 124 a data-parallel rank that heard nothing from
// the other ranks for CTGRAD_MPI_TIMEOUT seconds (one died or hangs).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <sstream>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/ops/precision.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

#include <ctgrad/training/distributed.hpp>
#ifdef CTGRAD_HAVE_MPI
#include <ctgrad/training/mpi.hpp>
#endif
#include <thread>

#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/folder_lock.hpp>

#include "git_commit.h"
#include "option_text.hpp"
#include "plugins.hpp"
#include "saved_config.hpp"
#include "standard_output.hpp"
#include "task.hpp"

namespace ctgrad::cli {

int ablate(const std::vector<std::string>& args);               // apps/ablate.cpp
int average_checkpoints(const std::vector<std::string>& args);  // apps/average.cpp
int export_model(const std::vector<std::string>& args);         // apps/hf_folders.cpp
// --from DIR (apps/hf_folders.cpp): the config keys a Hugging Face model folder sets; whether its
// parameters fit in memory (config_error otherwise), checked before the model is built.
std::vector<std::pair<std::string, std::string>> folder_keys(const Task& t, const std::filesystem::path& dir);
void check_folder_fits(const std::filesystem::path& dir);
int data_command(const std::vector<std::string>& args);         // apps/data_command.cpp

namespace {

using training::printable;

struct Args {
  std::string command, model, run_dir, config_file, checkpoint, from;
  std::vector<std::string> sets;
  std::vector<std::pair<std::string, std::string>> options;  // a command's own --options
  bool resume = false, overwrite = false, help = false;
  int threads = 0;
};

const Task* find_task(const std::string& name) {
  for (const Task& t : tasks())
    if (t.name == name) return &t;
  return nullptr;
}

std::string model_list() {
  std::string s;
  for (const Task& t : tasks()) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

const Command* find_command(const Task& t, const std::string& name) {
  for (const Command& c : t.commands)
    if (c.name == name) return &c;
  return nullptr;
}

std::string command_list(const Task& t) {
  std::string s = "train, eval";
  for (const Command& c : t.commands)
    if (c.name != "eval") s += ", " + c.name;
  for (const TrainingCommand& c : t.training_commands) s += ", " + c.name;
  return s;
}

int usage(const Task* t, FILE* out = stdout) {
  std::fprintf(out, "usage: ctgrad <command> <model> [options]\n\n"
              "  train <model>   [--config FILE] [--set key=value ...] [--run DIR] [--resume | --overwrite] [--threads N]\n"
              "  eval <model>    [--run DIR] [--checkpoint FILE] [--set key=value ...] [--threads N]\n"
              "  check <model>   [--config FILE] [--set key=value ...]   builds the model a config describes and says its size (writes nothing)\n"
              "  ablate <model>  --grid key=a,b [--grid ...] | --vary key=a,b [--vary ...] [--seeds N] [--set key=value ...] [--jobs J] [--threads N] [--run DIR]\n"
              "                  [--name TEXT] [--metric M] [--max-runs N] [--yes] [--retry-failed]   an ablation study (docs/ablations.md);\n"
              "                  --retry-failed runs again the runs that failed (their failed.json), which a plain rerun keeps\n"
              "  average-checkpoints <model> --run DIR [--last K] [--out FILE] [--overwrite]   the mean of the last K kept checkpoints\n"
              "  export          --run DIR --to OUT [--checkpoint FILE] [--overwrite]   a run as a Hugging Face model folder (gpt, llama, bert, vit, t5)\n"
              "  (train, eval, sample, check of gpt, llama and t5, train, eval, fill-mask of bert, finetune bert and t5, train and eval of vit take --from DIR: a Hugging Face model folder's weights and tokenizer;\n"
              "   docs/models/pretrained.md)\n"
              "  data ende       [--sources ddtp,libreoffice,gettext] [--placeholders keep|drop] [--max-packages N] [--dir DIR] [--out DIR] [--overwrite]\n"
              "                  the EN-DE corpus from Debian's own translations (downloads into $CTGRAD_DATA/ende; docs/models/transformer.md)\n"
              "  data tokenize   --data PATH --out DIR (--tokenizer RUN|FILE | --vocab N [--model bpe|unigram] | --chars) [--val-fraction F]\n"
              "                  [--shard-tokens N] [--text-field F] [--overwrite]   a corpus into token shards: train with --set data=DIR\n"
              "  help [<model>]  this text, or a model's commands, config keys and options\n\n"
              "exit codes: 0 done, 1 a runtime failure (or an ablation study left incomplete), 2 bad input, 3 training diverged,\n"
              "  124 a data-parallel rank heard nothing from the others for CTGRAD_MPI_TIMEOUT seconds, 130 interrupted (after saving)\n\nmodels:\n");
  for (const Task& task : tasks())
    if (!t || &task == t) std::fprintf(out, "  %-12s %s (commands: %s)\n", task.name.c_str(), task.summary.c_str(), command_list(task).c_str());
  if (const std::string more = models_not_built(); !t && !more.empty()) std::fprintf(out, "  also: %s\n", more.c_str());
  if (t) {
    std::printf("\nconfig keys of %s (--set key=value; a run folder's checkpoint keeps them):\n%s", t->name.c_str(), t->schema.describe().c_str());
    for (const Command& c : t->commands) {
      std::printf("\nctgrad %s %s: %s\n", c.name.c_str(), t->name.c_str(), c.help.c_str());
      std::string opts = c.options.describe();
      std::printf("%s", opts.c_str());
    }
    for (const TrainingCommand& c : t->training_commands) {
      std::string keys;
      for (const auto& k : c.keys) keys += " [--" + k + " X]";
      std::printf("\nctgrad %s %s%s [train's options]: %s; the same as `ctgrad train %s` (ctgrad help %s)\n", c.name.c_str(), t->name.c_str(),
                  keys.c_str(), c.help.c_str(), c.task.c_str(), c.task.c_str());
    }
  }
  return 0;
}

Args parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) rest.emplace_back(argv[i]);
  if (rest.empty()) return a;  // usage, as an error
  if (rest[0] == "help" || rest[0] == "--help" || rest[0] == "-h") {
    a.help = true;
    if (rest.size() > 1) a.model = rest[1];
    if (rest.size() > 2) throw config_error("help takes at most a model name, got '" + rest[2] + "' too");
    return a;
  }
  if (rest[0].rfind("-", 0) == 0)
    throw config_error("'" + rest[0] + "': the command and the model come first: ctgrad <command> <model> [options] (ctgrad help)");
  if (rest.size() < 2) throw config_error("usage: ctgrad <command> <model> [options] (models: " + model_list() + "; ctgrad help)");
  a.command = rest[0], a.model = rest[1];
  const Task* t = find_task(a.model);
  if (!t) {
    std::vector<std::string> names;
    for (const Task& task : tasks()) names.push_back(task.name);
    if (const std::string hint = missing_model_hint(a.model); !hint.empty()) throw config_error(hint);
    const std::string near = training::closest(a.model, names);
    throw config_error("unknown model '" + a.model + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)") + " (models: " + model_list() + ")");
  }
  for (const TrainingCommand& c : t->training_commands) {
    if (c.name != a.command) continue;
    // Rewritten to the train command line it stands for, its keys as --set.
    std::vector<std::string> line{"ctgrad", "train", c.task};
    for (std::size_t i = 2; i < rest.size(); ++i) {
      const bool key = rest[i].rfind("--", 0) == 0 && std::find(c.keys.begin(), c.keys.end(), rest[i].substr(2)) != c.keys.end();
      if (!key) {
        line.push_back(rest[i]);
        continue;
      }
      if (i + 1 >= rest.size()) throw config_error(rest[i] + " needs a value");
      line.insert(line.end(), {"--set", rest[i].substr(2) + "=" + rest[i + 1]});
      ++i;
    }
    std::vector<char*> argv2;
    for (auto& w : line) argv2.push_back(w.data());
    return parse(int(argv2.size()), argv2.data());
  }
  const Command* own = find_command(*t, a.command);
  if (a.command != "train" && a.command != "eval" && a.command != "check" && !own)
    throw config_error(a.model + " has no command '" + a.command + "' (commands: " + command_list(*t) + ")");
  a.run_dir = "runs/" + a.model;
  bool run_given = false, threads_given = false;
  for (std::size_t i = 2; i < rest.size(); ++i) {
    const std::string& o = rest[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= rest.size()) throw config_error(o + " needs a value");
      return rest[++i];
    };
    if (o == "--help" || o == "-h") a.help = true;
    else if (o == "--config" || o == "--run") {
      std::string& slot = o == "--config" ? a.config_file : a.run_dir;
      if (o == "--run" ? run_given : !a.config_file.empty())
        throw config_error(o + " is given twice ('" + slot + "' and '" + rest[i + 1 < rest.size() ? i + 1 : i] + "'): give one" +
                           (o == "--config" ? " (several keys: one file, or --set key=value)" : ""));
      slot = value();
      if (slot.empty()) throw config_error(o + " needs a " + (o == "--run" ? "folder" : "file") + " name, got ''");
      one_line(o, slot);
      if (o == "--run") run_given = true;
    } else if (o == "--set") a.sets.push_back(value());
    else if (o == "--checkpoint" && a.command != "train" && a.command != "check") {
      if (!a.checkpoint.empty()) throw config_error("--checkpoint is given twice: give it once");
      a.checkpoint = value();
      if (a.checkpoint.empty()) throw config_error("--checkpoint needs a file name, got ''");
      one_line("--checkpoint", a.checkpoint);
    } else if (o == "--from" && t->from_hf) {
      if (!a.from.empty()) throw config_error("--from is given twice: give it once");
      a.from = value();
      if (a.from.empty()) throw config_error("--from needs a model folder, got ''");
      one_line("--from", a.from);
    } else if (o == "--resume" && a.command == "train") a.resume = true;
    else if (o == "--overwrite" && a.command == "train") a.overwrite = true;
    else if (o == "--threads") {
      if (threads_given) throw config_error("--threads is given twice: give it once");
      threads_given = true;
      a.threads = int(training::parse_integer(value(), "--threads", {.min = 0, .max = 4096}));
    }
    else if (own && o.rfind("--", 0) == 0 && own->options.find(o.substr(2))) {
      const training::Key& k = *own->options.find(o.substr(2));
      for (const auto& [given, _] : a.options)  // the second would silently win
        if (given == k.name) throw config_error(o + " is given twice: give it once");
      a.options.emplace_back(k.name, k.kind == training::Kind::flag ? "true" : value());
    } else {
      std::vector<std::string> known = {"--config", "--set", "--run", "--threads", "--help"};
      if (t->from_hf) known.push_back("--from");
      if (a.command == "train") known.insert(known.end(), {"--resume", "--overwrite"});
      else if (a.command != "check") known.push_back("--checkpoint");
      if (own)
        for (const training::Key& k : own->options.keys()) known.push_back("--" + k.name);
      const std::string near = training::closest(o, known);
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw config_error("unknown option '" + o + "' for ctgrad " + a.command + " " + a.model + (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                         "; options: " + list);
    }
  }
  if (a.resume && a.overwrite) throw config_error("--resume continues the run in the folder, --overwrite replaces it: give one");
  if (!a.from.empty() && a.resume) throw config_error("--resume continues the run's checkpoint, --from starts a new run from a model folder: give one");
  if (!a.from.empty() && !a.checkpoint.empty()) throw config_error("--checkpoint reads a run's checkpoint, --from a model folder: give one");
  return a;
}

std::string read_file(const std::string& path, std::size_t limit) {
  try {  // a regular file of bounded size: not a FIFO, a device or a folder
    const std::vector<std::byte> bytes = checkpoint::read_regular_file(path, "config file " + path, limit);
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } catch (const checkpoint::format_error& e) {
    throw config_error(e.what());
  }
}

// The config of this command: the checkpoint's (when one is read) or the defaults, or a model
// folder's keys (--from), then the --config file, then each --set; the keys a checkpoint or the
// folder pins must keep their values.
Config make_config(const Task& t, const Args& a, const Context& ctx, std::optional<Config>& saved) {
  Config cfg = t.schema.defaults();
  std::vector<std::pair<std::string, std::string>> from_folder;
  if (!ctx.pretrained.empty()) {
    from_folder = folder_keys(t, ctx.pretrained);
    for (const auto& [k, v] : from_folder) cfg.set(k, v, "the config.json of --from " + ctx.pretrained.string());
  }
  const Config folder_cfg = cfg;
  if (ctx.from_checkpoint) {
    std::string defaulted;
    saved = saved_config(t, ctx.folder.checkpoint(), &defaulted);
    // A key the checkpoint does not state (written by an older version, or edited): the default,
    // said out loud, since a resumed run then need not continue as the original would have.
    if (!defaulted.empty())
      std::fprintf(stderr, "warning: the config in %s does not state %s: using the default%s\n", ctx.folder.checkpoint().c_str(),
                   defaulted.c_str(), defaulted.find(',') == std::string::npos ? "" : "s");
    cfg = *saved;
  }
  if (!a.config_file.empty()) cfg.merge_json(read_file(a.config_file, 1 << 20), "config file " + a.config_file);
  for (const auto& s : a.sets) cfg.set(s, "--set");
  for (const auto& [k, v] : from_folder)  // the folder's model: its sizes and architecture are not the command's to change
    if (cfg.show(k) != folder_cfg.show(k))
      throw config_error("--from " + ctx.pretrained.string() + ": its config.json makes " + k + "=" + folder_cfg.show(k) + ", the command gives " + k + "=" + cfg.show(k) +
                         " (a pretrained model keeps its architecture; leave " + k + " out)");
  if (t.dependent_defaults) t.dependent_defaults(cfg);  // stated in the checkpoint: a resumed run keeps them
  if (saved) {
    const training::Role pinned = a.command == "train" ? training::Role::run : training::Role::model;
    const auto diff = cfg.differences(*saved, pinned);
    if (!diff.empty()) {
      std::string list;
      for (const auto& d : diff) list += (list.empty() ? "" : "; ") + d;
      throw config_error("the checkpoint in " + ctx.folder.dir().string() + " was trained with " + list +
                         (a.command == "train" ? " (resume with the same config, or start a new run)" : ""));
    }
    if (t.check_against_checkpoint) t.check_against_checkpoint(cfg, *saved, ctx);
  }
  return cfg;
}

// Ctrl-C or SIGTERM before the work could stop cleanly (loading data, opening the model).
int interrupted_exit() {
  std::fprintf(stderr, "ctgrad: interrupted\n");
  return 130;
}

// The ranks of this job: MPI's world when an MPI launcher started this process with more than
// one rank, else one process.
int launched_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* n = std::getenv(v)) return std::max(1, std::atoi(n));
  if (std::getenv("PMIX_RANK") || std::getenv("PMI_RANK"))  // srun: the task count says
    if (const char* n = std::getenv("SLURM_NTASKS")) return std::max(1, std::atoi(n));
  return 1;
}
// Whether MPI was started (an error then ends every rank through it; before, each rank just exits).
bool mpi_started = false;
training::Communicator& world() {
  static std::unique_ptr<training::Communicator> comm = [] () -> std::unique_ptr<training::Communicator> {
    const int n = launched_ranks();
    if (n <= 1) return std::make_unique<training::Solo>();
#ifdef CTGRAD_HAVE_MPI
    // The variables are read before MPI starts: a bad one is a one-line error of each rank.
    double timeout = 300, bucket_mb = 0;
    if (const char* t = std::getenv("CTGRAD_MPI_TIMEOUT")) timeout = training::parse_real(t, "CTGRAD_MPI_TIMEOUT", {.min = 1, .max = 1e6});
    if (const char* mb = std::getenv("CTGRAD_BUCKET_MB")) bucket_mb = training::parse_real(mb, "CTGRAD_BUCKET_MB", {.min = 0.001, .max = 1e5});
    auto c = training::mpi_world(timeout);
    mpi_started = true;
    if (bucket_mb > 0) c->bucket_bytes = std::size_t(bucket_mb * (1 << 20));
    if (const char* o = std::getenv("CTGRAD_OVERLAP")) c->overlap = std::string(o) != "0";
    if (!c->leader()) std::freopen("/dev/null", "w", stdout);  // one progress bar: rank 0's
    return c;
#else
    throw config_error("started by an MPI launcher with " + std::to_string(n) +
                       " ranks, but this ctgrad was built without MPI (apt-get install libopenmpi-dev openmpi-bin, then rebuild)");
#endif
  }();
  return *comm;
}

int run(const Args& a) {
  const Task& t = *find_task(a.model);
  training::Communicator& comm = world();
  const bool parallel = comm.size() > 1;
  if (parallel) {
    if (a.command != "train")
      throw config_error("ctgrad " + a.command + " runs as one process: start it without mpirun (only train and finetune are data-parallel)");
    if (!t.data_parallel) {
      std::string list;
      for (const Task& o : tasks())
        if (o.data_parallel) list += (list.empty() ? "" : ", ") + o.name;
      throw config_error(t.name + " does not train data-parallel yet (models that do: " + list + "): start it without mpirun");
    }
  }
  int threads = a.threads;
  if (parallel && threads == 0) {  // the cores of this machine shared by its ranks
    int local = 1;
    if (const char* n = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(n));
    threads = std::max(1, int(std::thread::hardware_concurrency()) / local);
  }
  // Rank 0 sets the run up (the folder, the tokenizer, a checkpoint of the initial weights for a
  // new run); the other ranks then open it as a run to continue: the same weights, tokenizer and
  // config on every rank. The run folder must be one every rank sees (a shared file system).
  const bool follower = parallel && !comm.leader();
  if (follower) {
    std::string ok;
    comm.broadcast(ok, 0, "rank 0's set-up of the run");
  }
  if (a.command == "check") {  // the model of a config, built and planned, its size said; nothing is read or written
    if (parallel) throw config_error("ctgrad check runs as one process: start it without mpirun");
    const Context ctx{"check", training::RunFolder(a.run_dir), false, a.from, threads};
    std::optional<Config> saved;
    const Config cfg = make_config(t, a, ctx, saved);
    const std::unique_ptr<Session> session = t.open(cfg, ctx);
    const Executor<float>& m = session->model();
    std::printf("ctgrad check %s: the config makes a model of %lld parameters (%lld without the embedding tables)\n", t.name.c_str(),
                (long long)m.parameter_count(), (long long)(m.parameter_count() - m.embedding_parameter_count()));
    return 0;
  }
  // With --from, rank 0 starts the run from the folder and the other ranks open its first checkpoint, as for any new run.
  Context ctx{a.command, training::RunFolder(a.run_dir), follower || ((a.command != "train" || a.resume) && a.from.empty()),
              follower ? std::filesystem::path() : std::filesystem::path(a.from), threads, comm.shard(), parallel ? &comm : nullptr};
  if (!a.checkpoint.empty())  // a file of the run folder, or a path
    ctx.folder.use_checkpoint(a.checkpoint.find('/') == std::string::npos ? ctx.folder.file(a.checkpoint) : std::filesystem::path(a.checkpoint));
  if (ctx.from_checkpoint) {
    if (follower && !ctx.folder.has_checkpoint())
      throw config_error("rank " + std::to_string(comm.rank()) + " does not see rank 0's checkpoint " + ctx.folder.checkpoint().string() +
                         ": the run folder must be on a file system every rank shares");
    ctx.folder.require_checkpoint();
  }
  if (training::interrupted()) return interrupted_exit();
  std::optional<Config> saved;
  const Config cfg = make_config(t, a, ctx, saved);
  if (cfg.schema().find("precision")) {
    const std::string why = kernel::set_gemm_precision(cfg.text("precision") == "bf16" ? kernel::Precision::bf16 : kernel::Precision::fp32);
    if (!why.empty()) std::fprintf(stderr, "ctgrad: warning: %s\n", why.c_str());
  }
  // What a new run reads (a pretrained run, its data): the run folder may not be it or lie inside it,
  // refused before the folder is made.
  std::vector<std::pair<std::string, std::filesystem::path>> inputs;
  for (const std::string& k : t.input_folders) {  // a value that names no path (data=kjv) is no folder; scheme:PATH (images:DIR) names PATH
    std::string v = cfg.text(k);
    if (std::error_code ec; !std::filesystem::exists(v, ec) && v.find(':') != std::string::npos) v = v.substr(v.find(':') + 1);
    if (std::error_code ec; std::filesystem::exists(v, ec)) inputs.emplace_back("--set " + k, v);
  }
  if (!ctx.pretrained.empty()) inputs.emplace_back("--from", ctx.pretrained);
  if (a.command == "train" && !ctx.from_checkpoint && !follower) ctx.folder.check_inputs(a.overwrite, inputs);
  if (!ctx.pretrained.empty()) check_folder_fits(ctx.pretrained);
  std::unique_ptr<Session> session = t.open(cfg, ctx);
  // One training at a time in a run folder (rank 0's, under a launcher): a second `train` there,
  // a resume while a study's run trains, would write the same checkpoint and metrics.
  std::optional<training::FolderLock> lock;
  if (a.command == "train" && !follower) {
    std::error_code ec;
    std::filesystem::create_directories(ctx.folder.dir(), ec);
    if (std::filesystem::is_directory(ctx.folder.dir(), ec)) lock.emplace(ctx.folder.dir(), ".ctgrad.lock", "the run folder", "another ctgrad train");
  }
  if (ctx.from_checkpoint) {
    const auto meta = checkpoint::load_training<float>(ctx.folder.checkpoint(), session->model(), &session->optimizer());
    // A tokenizer swapped or edited since training would silently give garbage: its hash is checked.
    const auto file = meta.find("tokenizer"), hash = meta.find("tokenizer_hash");
    if ((file == meta.end()) != (hash == meta.end()))
      throw config_error(ctx.folder.checkpoint().string() + " names a tokenizer without its hash, or a hash without the file: the checkpoint is damaged");
    if (file != meta.end()) {
      const std::string& name = file->second;  // a file of the run folder, nothing outside it
      if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
        throw config_error(ctx.folder.checkpoint().string() + " names the tokenizer '" + name.substr(0, 80) + "': not a file name of the run folder");
      const auto path = ctx.folder.file(name);
      std::error_code ec;
      const auto st = std::filesystem::status(path, ec);  // no throw on a symlink loop
      if (!std::filesystem::exists(st)) throw config_error("the tokenizer " + path.string() + " is missing" + (ec ? " (" + ec.message() + ")" : ""));
      if (!std::filesystem::is_regular_file(st)) throw config_error("the tokenizer " + path.string() + " is not a regular file");
      if (file_hash(path) != hash->second)
        throw config_error("the tokenizer " + path.string() + " is not the one " + ctx.folder.checkpoint().string() +
                           " was trained with (its hash differs): restore it, or train a new run");
    }
  } else if (a.command == "train") {
    ctx.folder.start_new(a.overwrite, inputs);
  }
  if (std::error_code ec; a.command == "train" && std::filesystem::is_directory(std::filesystem::symlink_status(ctx.folder.file("run.json"), ec)))
    throw config_error("the run folder " + printable(ctx.folder.dir().string()) + " holds a folder run.json where the run writes a file: move it away");
  session->prepare();  // (with --from: the folder's tokenizer, checked before its weights are read)
  if (!ctx.pretrained.empty()) {  // the folder's weights, checked name by name and shape by shape
    const Stopwatch load;
    const pretrained::LoadReport r = pretrained::load_hf_weights(ctx.pretrained, pretrained::read_hf_model(ctx.pretrained), session->model().parameters(),
                                                                 a.command == "train" ? t.hf_head : nullptr);
    std::int64_t fresh = 0;
    std::string names;
    for (const std::string& n : r.fresh) {
      fresh += std::int64_t(session->model().parameter(n).value.span().size());
      names += (names.empty() ? "" : ", ") + n;
    }
    std::fprintf(stderr, "loaded %lld parameters from %s in %.1f s\n", (long long)(session->model().parameter_count() - fresh),
                 printable(ctx.pretrained.string()).c_str(), load.seconds());
    if (!r.fresh.empty()) std::fprintf(stderr, "new (the task's head): %s\n", names.c_str());
    if (r.unused) std::fprintf(stderr, "unused: %d tensors of the folder (its pretraining head)\n", r.unused);
  }
  if (training::interrupted()) return interrupted_exit();
  if (a.command == "train")  // what the run is, for studies and scripts that read run folders
    checkpoint::write_atomically(ctx.folder.file("run.json"), "{\"model\": \"" + t.name + "\", \"parameters\": " +
                                                                  std::to_string(session->model().parameter_count()) + ", \"non_embedding_parameters\": " +
                                                                  std::to_string(session->model().parameter_count() - session->model().embedding_parameter_count()) +
                                                                  ", \"config\": " + cfg.to_json() + "}\n");

  if (a.command != "train") {
    static const Schema none;
    const Command* c = find_command(t, a.command);
    Config opts = (c ? c->options : none).defaults();
    for (const auto& [k, v] : a.options) opts.set(k, v, "--" + k);
    const int rc = a.command == "eval" ? session->eval(opts) : session->command(a.command, opts);
    return rc == 130 ? interrupted_exit() : rc;
  }
  training::LoopOptions loop = session->loop();
  loop.metadata = session->metadata();
  loop.metadata["config"] = cfg.to_json();
  loop.metadata["model"] = t.name;
  if (parallel) {
    if (!follower) {
      if (!ctx.from_checkpoint)  // the initial weights, for the other ranks to load
        checkpoint::save_training<float>(ctx.folder.checkpoint(), session->model(), &session->optimizer(), loop.metadata);
      std::string ok = "ok";
      comm.broadcast(ok, 0, "rank 0's set-up of the run");
    }
    training::require_same(comm, "the build (git commit)", CTGRAD_GIT_COMMIT);
    training::require_same(comm, "the config", cfg.to_json(), [&](const std::string& root, const std::string&) {
      Config theirs = t.schema.defaults();
      theirs.merge_json(root, "rank 0's config");
      std::string list;
      for (const auto& d : cfg.differences(theirs, training::Role::free)) list += (list.empty() ? "" : "; ") + d;
      return list;
    });
    loop.comm = &comm;
    std::printf("data parallel: %d ranks of %d thread%s, each feeding 1/%d of every batch; gradients summed in buckets of %.1f MB\n",
                comm.size(), session->model().threads(), session->model().threads() == 1 ? "" : "s", comm.size(),
                double(comm.bucket_bytes) / (1 << 20));
  }
  if (session->optimizer().steps() >= loop.steps) {
    std::printf("the checkpoint in %s is already at step %lld of %lld: nothing to train (raise --set steps=)\n", ctx.folder.dir().c_str(),
                (long long)session->optimizer().steps(), (long long)loop.steps);
    return 0;
  }
  if (session->optimizer().steps() > 0)
    std::printf("resuming at step %lld from %s\n", (long long)session->optimizer().steps() + 1, ctx.folder.checkpoint().c_str());
  training::Trainer trainer(ctx.folder, loop);
  training::Run r = session->run();
  const training::Outcome out = trainer.fit(r);
  if (parallel) {  // no rank exits before rank 0 has saved: mpirun ends the job at the first non-zero exit
    std::fflush(stdout);  // rank 0's last words reach mpirun before any rank exits
    double done[1] = {0};
    comm.allreduce_sum(done, "the end of training");
    if (follower) return 0;  // rank 0's exit code is the job's; an earlier non-zero one would cut its output short
  }
  if (out.interrupted) return 130;
  if (out.diverged) return 3;
  if (parallel) {
    const double steps = double(std::max<std::int64_t>(out.last - out.first + 1, 1));
    std::printf("communication: %.1f ms per step, %.1f%% of the training time (waits for the slower rank included); gradients: %.1f ms "
                "in %d bucket%s (%.2f MB), %.1f ms of it waited for (%.0f%% hidden behind the backward pass)\n",
                1e3 * out.communication_seconds / steps, 100 * out.communication_seconds / std::max(out.seconds, 1e-9),
                1e3 * out.gradient_seconds / steps, out.buckets, out.buckets == 1 ? "" : "s", 4e-6 * double(session->model().parameter_count()),
                1e3 * out.communication_waited / steps, 100 * std::max(0.0, 1 - out.communication_waited / std::max(out.gradient_seconds, 1e-12)));
  }
  if (session->model().profiling_ops())  // CTGRAD_PROFILE_OPS=1
    std::printf("time by op, per training step (validation forwards included):\n%s",
                format_op_profile(session->model().op_profile(), out.last - out.first + 1).c_str());
  const bool plotted = !out.plot.empty();
  std::printf("done after %s of training: validation loss %.4f %s; checkpoint %s, metrics %s%s%s\n",
              training::format_duration(out.seconds).c_str(), out.last_validation.loss(), loop.unit.c_str(), printable(ctx.folder.checkpoint().string()).c_str(),
              printable(ctx.folder.file("metrics.jsonl").string()).c_str(), plotted ? ", plot " : "",
              plotted ? printable(ctx.folder.file("loss.png").string()).c_str() : "");
  return session->after_training(out);
}

}  // namespace

bool gpt_task_linked();  // tasks/gpt.cpp: the main job, in every program of the library

int main(int argc, char** argv, std::vector<Task> models) {
  if (!gpt_task_linked()) return 1;  // a real reference: the static library's gpt.o, and its registration, are linked
  // A standard descriptor the caller closed would be taken by the first file opened (a lock file,
  // metrics.jsonl), the command's output written into it: each is /dev/null instead, and a closed
  // standard output is a failed write, said at the end.
  bool stdout_closed = false;
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);  // the lowest free descriptor: fd
      if (opened >= 0 && opened != fd) ::dup2(opened, fd), ::close(opened);
      stdout_closed = stdout_closed || fd == 1;
    }
  ctgrad::training::install_interrupt_handlers();  // first: a signal at any moment ends in an orderly way
  for (Task& t : models) {                          // a program's own models (cli.hpp)
    if (std::any_of(tasks().begin(), tasks().end(), [&](const Task& have) { return have.name == t.name; })) {
      std::fprintf(stderr, "ctgrad: the model name '%s' is taken (%s): name yours otherwise\n", printable(t.name).c_str(),
                   t.name == "gpt" ? "a built-in model" : "two models of this program");
      return 2;
    }
    register_task(std::move(t));
  }
  load_plugins();                                  // the models beyond the main job (apps/plugins.hpp)
  std::signal(SIGXFSZ, SIG_IGN);                   // a file-size limit fails the write with a message, not a kill
  catch_broken_pipe();                             // `| head -1` ends the command normally (standard_output.hpp)
  auto fail = [](int code, const std::string& m) {
    if (ctgrad::training::interrupted()) return interrupted_exit();  // a failure caused by the interrupt (a killed child)
    if (mpi_started) try {  // the other ranks would wait for this one: every rank stops, now
        world().abort(printable(m.rfind("ctgrad: ", 0) == 0 ? m.substr(8) : m), code);
      } catch (const std::exception&) {  // a build without MPI: one message per rank
      }
    std::fprintf(stderr, "%s%s\n", m.rfind("ctgrad: ", 0) == 0 ? "" : "ctgrad: ", printable(m).c_str());
    return code;
  };
  const int code = [&]() -> int {
  try {
    // Under an MPI launcher only `train` and `finetune` (a train command line) run, data-parallel:
    // another command would run once per rank (an ablate's runs N times over, into the same folders).
    if (launched_ranks() > 1 && (argc < 2 || (std::string(argv[1]) != "train" && std::string(argv[1]) != "finetune")))
      throw config_error("ctgrad" + (argc > 1 ? " " + printable(argv[1]) : std::string()) + " runs as one process: start it without mpirun or srun " +
                         "(only train and finetune are data-parallel)");
    // The folders the data cache lives in are paths shown in messages: text, one line.
    for (const char* var : {"CTGRAD_CACHE", "XDG_CACHE_HOME", "HOME"})
      if (const char* v = std::getenv(var)) one_line(var, v);
    if (argc > 1 && std::string(argv[1]) == "ablate") return ablate(std::vector<std::string>(argv + 1, argv + argc));
    if (argc > 1 && std::string(argv[1]) == "data") return data_command(std::vector<std::string>(argv + 1, argv + argc));
    if (argc > 1 && std::string(argv[1]) == "average-checkpoints") return average_checkpoints(std::vector<std::string>(argv + 1, argv + argc));
    if (argc > 1 && std::string(argv[1]) == "export") return export_model(std::vector<std::string>(argv + 1, argv + argc));
    const Args a = parse(argc, argv);
    if (a.command.empty() && !a.help) return usage(nullptr, stderr), 2;
    if (a.help) {
      const Task* t = a.model.empty() ? nullptr : find_task(a.model);
      if (!a.model.empty() && !t) {
        if (const std::string hint = missing_model_hint(a.model); !hint.empty()) throw config_error(hint);
        throw config_error("unknown model '" + a.model + "' (models: " + model_list() + ")");
      }
      return usage(t);
    }
    return run(a);
  } catch (const ctgrad::hyper_error& e) {  // a --set value an op refused
    return fail(2, e.what());
  } catch (const config_error& e) {  // the command line, a config, a run folder
    return fail(2, e.what());
  } catch (const ctgrad::checkpoint::format_error& e) {  // a damaged or foreign checkpoint
    return fail(2, e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "out of memory (a smaller batch, context or model, or fewer runs at once)");
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
  }();
  // What the command printed must have reached its standard output (a full disk, a closed descriptor).
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (!stdout_closed && stdout_reader_gone()) return code;  // `| head`: the reader had what it wanted
  if (stdout_closed || !flushed || std::ferror(stdout) || !std::cout) {
    std::fprintf(stderr, "ctgrad: cannot write standard output%s\n",
                 stdout_closed ? ": it is closed" : !flushed ? (std::string(": ") + std::strerror(err)).c_str() : "");
    return code == 0 ? 1 : code;
  }
  return code;
}

}  // namespace ctgrad::cli
