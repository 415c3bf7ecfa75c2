#include "task.hpp"

#include <nlohmann/json.hpp>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/pretrained/hf_model.hpp>
#include <ctgrad/training/escape.hpp>

#include <cstdio>
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace ctgrad::cli {

namespace {
std::vector<Task>& registry() {
  static std::vector<Task> r;
  return r;
}
}  // namespace

std::string exact(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string command_reading(const pretrained::HfModel& m) {
  return m.is_gpt() ? "ctgrad gpt reads it" : m.is_llama() ? "ctgrad llama reads it" : m.is_bert() ? "ctgrad finetune bert reads it"
       : m.is_t5()                                                       ? "ctgrad t5 reads it"
                                                                         : "ctgrad vit reads it";
}

bool register_task(Task task) {
  registry().push_back(std::move(task));
  return true;
}
const std::vector<Task>& tasks() { return registry(); }
void forget_tasks_after(std::size_t count) {
  if (registry().size() > count) registry().erase(registry().begin() + std::ptrdiff_t(count), registry().end());
}

int Session::command(const std::string& name, const Config&) {
  throw config_error("this model has no command '" + name + "'");
}

void add_common_keys(Schema& s) {
  s.choice("precision", "fp32", {"fp32", "bf16"},
           "bf16: mixed precision, matmuls on bf16 operands with fp32 accumulation (CPUs with AVX512-BF16); weights, optimizer, "
           "softmax, norms and loss stay fp32");
  s.integer("seed", 1, {.min = 0}, "sets every random stream below that is -1", training::Role::run)
      .integer("init_seed", -1, {.min = -1}, "parameter initialisation (-1: seed)", training::Role::run)
      .integer("data_seed", -1, {.min = -1}, "data order and augmentation (-1: seed)", training::Role::run)
      .integer("dropout_seed", -1, {.min = -1}, "dropout masks (-1: seed)", training::Role::run);
}
namespace {
std::uint64_t seed_of(const Config& c, const char* key) {
  const std::int64_t v = c.integer(key);
  return std::uint64_t(v >= 0 ? v : c.integer("seed"));
}
}  // namespace
std::uint64_t init_seed(const Config& c) { return seed_of(c, "init_seed"); }
std::uint64_t data_seed(const Config& c) { return seed_of(c, "data_seed"); }
std::uint64_t dropout_seed(const Config& c) { return seed_of(c, "dropout_seed"); }

Options program_options_named(const Config& c, int threads, std::span<const std::string_view> hyper_names) {
  Options o{.threads = threads, .seed = std::uint64_t(c.integer("seed")), .init_seed = init_seed(c), .dropout_seed = dropout_seed(c)};
  for (std::string_view h : hyper_names)
    if (c.schema().find(h)) o.hypers.emplace_back(std::string(h), c.real(h));
  return o;
}

// Memory the system can give now (MemAvailable, or the physical memory when that is unknown),
// bounded by the cgroup's and the address-space limits.
double available_bytes() {
  double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    double kb = 0;
    while (in >> key >> kb >> unit)
      if (key == "MemAvailable:") {
        have = kb * 1024;
        break;
      }
  }
  double max = 0, current = 0;
  if (std::ifstream m("/sys/fs/cgroup/memory.max"); m >> max)  // "max" (no limit) does not read as a number
    if (std::ifstream c("/sys/fs/cgroup/memory.current"); c >> current) have = std::min(have, max - current);
  if (rlimit r{}; getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
    double used = 0;  // the address space in use now (VmSize)
    std::ifstream st("/proc/self/statm");
    st >> used;
    have = std::min(have, double(r.rlim_cur) - used * double(sysconf(_SC_PAGE_SIZE)));
  }
  return std::max(have, 0.0);
}

namespace {
std::string gb(double bytes) {
  char b[48];
  const double g = bytes / 1e9;
  std::snprintf(b, sizeof b, g < 100 ? "%.1f GB" : g < 1e9 ? "%.0f GB" : "%.3g GB", g);
  return b;
}
}  // namespace

namespace {
bool g_memory_elsewhere = false;
}
void judge_memory_elsewhere() { g_memory_elsewhere = true; }

void check_fits(const Executor<float>& model, std::array<std::int64_t, kMaxSymbols> sym, double extra, const std::string& what) {
  const auto bytes = model.plan_bytes_at(Mode::train, sym);
  const double have = available_bytes();
  if (!bytes) throw config_error(what + ": the activations' size overflows 64 bits");
  if (g_memory_elsewhere) return;
  const double need = double(*bytes) + extra + double(model.parameter_count()) * 8;
  if (need > have)
    throw config_error(what + " needs " + gb(need) + " for activations, inputs and parameters; " + gb(have) + " of memory is available (free memory, container and ulimit -v limits)");
}

void check_shards(const Context& ctx, std::int64_t rows, const std::string& key) {
  if (ctx.shard.count > 1 && rows % ctx.shard.count != 0)
    throw config_error(key + " " + std::to_string(rows) + " does not split into " + std::to_string(ctx.shard.count) +
                       " equal shards: give a multiple of the " + std::to_string(ctx.shard.count) + " ranks");
}

std::string message_of(const std::exception& e) {
  const std::string m = e.what();
  return m.rfind("ctgrad: ", 0) == 0 ? m.substr(8) : m;
}

std::string names_metadata(const std::vector<std::string>& names) { return nlohmann::json(names).dump(); }

std::vector<std::string> names_from_checkpoint(const std::filesystem::path& checkpoint, const std::string& key) {
  const checkpoint::File f(checkpoint);
  const auto it = f.metadata().find(key);
  const nlohmann::json j = it == f.metadata().end() ? nlohmann::json() : nlohmann::json::parse(it->second, nullptr, false);
  if (!j.is_array() || j.size() < 2 || !std::all_of(j.begin(), j.end(), [](const nlohmann::json& v) { return v.is_string(); }))
    throw config_error("the checkpoint " + checkpoint.string() + " records no " + key + " (two or more names)");
  return j.get<std::vector<std::string>>();
}

std::string file_hash(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw config_error("cannot read " + file.string());
  std::uint64_t h = 0xcbf29ce484222325ull;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001b3ull;
    if (!in) break;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

training::LoopOptions step_loop(const Config& c, std::function<double(std::int64_t)> lr, std::string unit, std::string items) {
  return {.steps = c.integer("steps"), .eval_every = c.integer("eval_every"), .clip = c.real("clip"), .lr = std::move(lr), .unit = std::move(unit),
          .items = std::move(items)};
}

checkpoint::Metadata tokenizer_metadata(const training::RunFolder& folder, const std::string& file) {
  return {{"tokenizer", file}, {"tokenizer_hash", file_hash(folder.file(file))}};
}

double token_nll(const float* logits, int vocab, std::int32_t target) {
  const float top = *std::max_element(logits, logits + vocab);
  double z = 0;
  for (int v = 0; v < vocab; ++v) z += std::exp(double(logits[v] - top));
  return std::log(z) - double(logits[target] - top);
}

void refuse_longer_context(const Config& c, const Config& saved, const Context& ctx) {
  if (ctx.command != "train" && c.integer("context") > saved.integer("context"))
    throw config_error("the checkpoint in " + ctx.folder.dir().string() + " was trained with context " + saved.show("context") +
                       ": it cannot run at " + c.show("context"));
}

PretrainedRun open_pretrained(const std::filesystem::path& dir, const std::string& model, const std::string& how) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw config_error("pretrained: a `" + how + "` run folder is needed (its tokenizer), even with init=scratch");
  const training::RunFolder from(dir);
  if (std::error_code ec; fs::exists(fs::symlink_status(dir, ec)) && !fs::is_directory(dir, ec))
    throw config_error("pretrained " + training::printable(dir.string()) + " is a file, not a run folder: give the folder of a `" + how + "` run");
  if (!from.has_checkpoint()) throw config_error("pretrained " + dir.string() + " holds no checkpoint: pretrain first (" + how + " " + training::shell_quote(dir.string()) + ")");
  PretrainedRun r;
  r.dir = dir;
  try {
    r.checkpoint = std::make_unique<checkpoint::File>(from.checkpoint());
  } catch (const checkpoint::format_error& e) {
    const std::string m = e.what();
    throw config_error("pretrained: " + (m.rfind("ctgrad: ", 0) == 0 ? m.substr(8) : m));
  }
  const auto& meta = r.checkpoint->metadata();
  const auto kind = meta.find("model"), hash = meta.find("tokenizer_hash"), config = meta.find("config");
  if (kind == meta.end() || kind->second != model)
    throw config_error("pretrained " + from.checkpoint().string() + " is a checkpoint of model '" + (kind == meta.end() ? "?" : kind->second) + "', not " +
                       model);
  if (config != meta.end()) r.config_json = config->second;
  r.tokenizer = from.file("tokenizer.model");
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(r.tokenizer, ec))) throw config_error("pretrained: the tokenizer " + r.tokenizer.string() + " is missing");
  if (!fs::is_regular_file(r.tokenizer, ec)) throw config_error("pretrained: the tokenizer " + r.tokenizer.string() + " is not a regular file");
  if (hash == meta.end() || file_hash(r.tokenizer) != hash->second)
    throw config_error("pretrained: the tokenizer " + r.tokenizer.string() + " is not the one " + from.checkpoint().string() +
                       " was trained with (its hash differs): its vocabulary would not match the weights");
  r.tokenizer_hash = hash->second;
  return r;
}

void PretrainedRun::copy_tokenizer(const std::filesystem::path& to) const {
  const auto bytes = checkpoint::read_regular_file(tokenizer, "the tokenizer " + tokenizer.string(), std::size_t(1) << 30);
  checkpoint::write_atomically(to, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  if (file_hash(to) != tokenizer_hash) throw config_error("pretrained: the tokenizer " + tokenizer.string() + " changed while it was copied");
}

int PretrainedRun::load_weights(Executor<float>& model, const std::function<bool(std::string_view)>& take, const std::string& shape_hint) const {
  int copied = 0;
  std::string missing;
  const std::string file = (dir / "checkpoint.safetensors").string();
  for (const auto& p : model.parameters()) {
    if (!take(p.name)) continue;
    const std::string name(p.name);
    if (!checkpoint->has(name)) {
      missing += (missing.empty() ? "" : ", ") + name;
      continue;
    }
    const auto& t = checkpoint->tensor(name);
    if (!std::equal(t.shape.begin(), t.shape.end(), p.value.shape().begin(), p.value.shape().end()))
      throw config_error("pretrained " + file + ": '" + name + "' has another shape than " + shape_hint);
    checkpoint->read<float>(name, p.value.span(), p.value.shape());
    ++copied;
  }
  if (!missing.empty()) throw config_error("pretrained " + file + " lacks " + missing.substr(0, 300));
  return copied;
}

}  // namespace ctgrad::cli

#include <ctgrad/graph/program.hpp>

namespace ctgrad::cli {

std::shared_ptr<const PlannedGraph> plan_model(const std::function<Builder()>& build) {
  std::shared_ptr<const PlannedGraph> planned;
  try {
    planned = std::make_shared<const PlannedGraph>(freeze(build()));
  } catch (const graph_error& e) {
    throw config_error(std::string("the config does not make a model: ") + e.what());
  }
  // The parameters, counted from the graph before any is allocated: with their gradients and two
  // optimizer moments, 16 bytes each.
  const RuntimeGraph& g = planned->graph();
  double params = 0;
  for (int i = 0; i < g.size; ++i)
    if (g[i].kind == NodeKind::param) {
      double n = 1;
      for (int k = 0; k < g[i].shape.rank; ++k) n *= double(g[i].shape[k].coef);
      params += n;
    }
  if (char n[40]; params > double(std::int64_t(1) << 50) || params * 16 > available_bytes())
    throw config_error("the model has " + std::string(n, std::size_t(std::snprintf(n, sizeof n, params < 1e15 ? "%.0f" : "%.3g", params))) + " parameters: with their gradients and optimizer state they need " + gb(params * 16) +
                       "; " + gb(available_bytes()) + " of memory is available (free memory, container and ulimit -v limits)");
  return planned;
}

ProgramMaker program_maker(std::shared_ptr<const PlannedGraph> planned) {
  return [planned = std::move(planned)](const Options& o) -> std::unique_ptr<Executor<float>> { return std::make_unique<Program<run_time>>(planned, o); };
}

ProgramMaker program_maker(std::function<Builder()> build) {
  struct Lazy {
    std::function<Builder()> build;
    std::shared_ptr<const PlannedGraph> planned;
  };
  auto lazy = std::make_shared<Lazy>(Lazy{std::move(build), nullptr});
  return [lazy](const Options& o) -> std::unique_ptr<Executor<float>> {
    if (!lazy->planned) lazy->planned = plan_model(lazy->build);
    return std::make_unique<Program<run_time>>(lazy->planned, o);
  };
}

void add_size_keys(Schema& s, const std::vector<PresetSizes>& presets) {
  using training::Role;
  auto listed = [&](int PresetSizes::*field, const char* unit = "") {
    std::string t;
    for (const PresetSizes& p : presets) t += (t.empty() ? "" : ", ") + p.name + " " + std::to_string(p.*field) + unit;
    return t;
  };
  const bool vocab = std::any_of(presets.begin(), presets.end(), [](const PresetSizes& p) { return p.vocab > 0; });
  const bool context = std::any_of(presets.begin(), presets.end(), [](const PresetSizes& p) { return p.context > 0; });
  s.integer("d_model", 0, {.min = 0, .max = 1 << 16}, "architecture: the width (0: the preset's: " + listed(&PresetSizes::d_model) + ")", Role::model)
      .integer("layers", 0, {.min = 0, .max = 1024}, "architecture: the depth, blocks (0: the preset's: " + listed(&PresetSizes::layers) + ")", Role::model)
      .integer("d_ff", 0, {.min = 0, .max = 1 << 18},
               "architecture: the feed-forward hidden width (0: the preset's multiple of d_model: " + listed(&PresetSizes::ff_mult, "x") +
                   "; gated, as SwiGLU, 2/3 of it rounded up to 8)",
               Role::model);
  if (vocab)
    s.integer("vocab", 0, {.min = 0, .max = 1 << 20}, "architecture: the vocabulary, at least the tokenizer's (0: the preset's: " + listed(&PresetSizes::vocab) + ")",
              Role::model);
  if (context)
    s.integer("max_context", 0, {.min = 0, .max = 1 << 20},
              "architecture: the longest context the model reads, learned positions' rows and decoding room (0: the preset's: " +
                  listed(&PresetSizes::context) + ")",
              Role::model);
  s.stated_when_set({"d_model", "layers", "d_ff"});
  if (vocab) s.stated_when_set({"vocab"});
  if (context) s.stated_when_set({"max_context"});
}

int ff_width(const Config& c, int d_model, int ff_mult, bool gated) {
  if (c.integer("d_ff")) return int(c.integer("d_ff"));
  return gated ? layers::gated_width(ff_mult * d_model) : ff_mult * d_model;
}

int size_or(const Config& c, const std::string& key, int preset) { return c.integer(key) ? int(c.integer(key)) : preset; }

layers::Arch arch_of(const Config& c, bool tie) {
  using namespace layers;
  Arch a;
  a.norm = c.text("norm") == "post" ? Norm::post : Norm::pre;
  a.norm_kind = c.text("norm_kind") == "rms" ? NormKind::rms : NormKind::layer;
  for (Act v : {Act::relu, Act::gelu, Act::gelu_tanh, Act::silu, Act::gated_gelu, Act::swiglu, Act::relu_squared})
    if (name(v) == c.text("act")) a.act = v;
  for (Pos v : {Pos::learned, Pos::sinusoidal, Pos::none, Pos::rope})
    if (name(v) == c.text("pos")) a.pos = v;
  a.tie = tie && c.flag("tie_embeddings");
  return a;
}

void check_heads(int d_model, int heads, int kv_heads, bool rope) {
  if (heads < 1 || d_model % heads)
    throw config_error("heads " + std::to_string(heads) + " does not divide d_model " + std::to_string(d_model) + ": give heads that divide the width");
  if (kv_heads < 1 || heads % kv_heads)
    throw config_error("kv_heads " + std::to_string(kv_heads) + " does not divide heads " + std::to_string(heads) + " (grouped-query attention)");
  if (rope && (d_model / heads) % 2)
    throw config_error("d_model " + std::to_string(d_model) + " over heads " + std::to_string(heads) + " is a head width of " +
                       std::to_string(d_model / heads) + ": rotary positions pair features, so it must be even");
}

std::function<void(Config&)> fit_context_to_model(std::function<int(const Config&)> preset_context) {
  return [preset_context = std::move(preset_context)](Config& c) {
    const std::int64_t most = c.integer("max_context") ? c.integer("max_context") : preset_context(c);
    if (!c.was_set("context") && c.integer("context") > most) c.set("context", std::to_string(most), "the model's longest context");
    if (c.was_set("context") && c.integer("context") > most && !c.was_set("max_context"))
      c.set("max_context", c.show("context"), "the context given");  // a longer context grows the model with it
  };
}

void add_arch_keys(Schema& s, const layers::Arch& d, bool tie, bool rope) {
  using training::Role;
  s.choice("norm", std::string(name(d.norm)), {"pre", "post"}, "architecture: residual blocks normalise before (pre) or after (post) the sublayer",
           Role::model)
      .choice("norm_kind", std::string(name(d.norm_kind)), {"layer", "rms"}, "architecture: LayerNorm or RMSNorm", Role::model)
      .choice("act", std::string(name(d.act)), {"relu", "gelu", "gelu_tanh", "swiglu"},
              "architecture: the feed-forward activation (swiglu: gated, 2/3 the width, about the same parameters)", Role::model)
      .choice("pos", std::string(name(d.pos)),
              rope ? std::vector<std::string>{"learned", "sinusoidal", "none", "rope"} : std::vector<std::string>{"learned", "sinusoidal", "none"},
              rope ? "architecture: absolute positions added to the embeddings, or rotary ones on q and k (rope)"
                   : "architecture: absolute positions added to the embeddings",
              Role::model)
      .integer("heads", 0, {.min = 0, .max = 1024}, "architecture: attention heads at the same d_model (0: the preset's)", Role::model);
  if (tie) s.flag("tie_embeddings", d.tie, "architecture: the output projection is the token embedding's transpose", Role::model);
  s.added_later({"norm", "norm_kind", "act", "pos", "heads", "tie_embeddings"});  // runs trained before them had the defaults
}

std::string describe_arch(const layers::Arch& a, bool with_tie) {
  std::string s = std::string(name(a.norm)) + "-norm " + (a.norm_kind == layers::NormKind::rms ? "RMSNorm" : "LayerNorm") + ", " +
                  std::string(name(a.act)) + ", " + (a.pos == layers::Pos::none ? std::string("no") : std::string(name(a.pos))) + " positions";
  if (with_tie) s += a.tie ? ", tied output" : ", untied output";
  return s;
}


}  // namespace ctgrad::cli
