// ctgrad train|eval|sample gpt: the GPT on the KJV Bible (docs/models/gpt.md). The default run is
// nanoGPT's "baby GPT" CPU recipe on the KJV text, characters as tokens. The session is every
// decoder-only family's (lm_session.hpp); this file is the GPT's keys and how they make a
// models::GptConfig, whose graphs are built at run time: any size, any combination of keys.
#include <ctgrad/models/gpt.hpp>

#include "lm_session.hpp"

namespace ctgrad::cli {
namespace {

const models::GptConfig& gpt_preset(const std::string& size) {
  return size == "tiny" ? models::kGptTiny : size == "medium" ? models::kGptMedium : models::kGptSmall;
}

struct GptFamily {
  using ModelConfig = models::GptConfig;
  using Sampler = models::GptSampler;
  static constexpr const char* name = "gpt";
  // The preset's graph: the hyperparameters every GPT has, for the schema.
  static const RuntimeGraph& hyper_graph() {
    static const RuntimeGraph g = freeze(models::gpt(models::kGptSmall));
    return g;
  }
  static ModelConfig model_config(const Config& c) {
    const ModelConfig& p = gpt_preset(c.text("size"));
    ModelConfig m = p;
    m.d_model = size_or(c, "d_model", p.d_model), m.n_layer = size_or(c, "layers", p.n_layer), m.n_head = size_or(c, "heads", p.n_head);
    m.d_ff = int(c.integer("d_ff")), m.vocab = size_or(c, "vocab", p.vocab), m.context = size_or(c, "max_context", p.context);
    m.arch = arch_of(c, true);
    m.kv_heads = int(c.integer("kv_heads")), m.qk_norm = c.flag("qk_norm"), m.bias = c.flag("bias");
    m.mixer = c.text("mixer") == "ssm" ? layers::Mixer::ssm : layers::Mixer::attention;
    if (m.mixer == layers::Mixer::attention) check_heads(m.d_model, m.n_head, m.kv_heads ? m.kv_heads : m.n_head, m.arch.pos == layers::Pos::rope);
    return m;
  }
  // --from: a GPT2LMHeadModel folder's model as keys (its dropout is not kept: --set dropout=).
  static std::vector<std::pair<std::string, std::string>> hf_keys(const pretrained::HfModel& m) {
    if (!m.is_gpt()) throw config_error("the folder holds a " + m.architecture + ": ctgrad's gpt reads GPT-2 folders (" + command_reading(m) + ")");
    const models::GptConfig& g = m.gpt();
    return {{"d_model", std::to_string(g.d_model)}, {"layers", std::to_string(g.n_layer)}, {"heads", std::to_string(g.n_head)},
            {"d_ff", std::to_string(g.d_ff)},       {"vocab", std::to_string(g.vocab)},     {"max_context", std::to_string(g.context)},
            {"norm", "pre"},                        {"norm_kind", "layer"},                 {"act", "gelu_tanh"},
            {"pos", "learned"},                     {"tie_embeddings", g.arch.tie ? "true" : "false"},
            {"bias", "true"},                       {"kv_heads", "0"},                      {"qk_norm", "false"},
            {"mixer", "attention"},                 {"norm_eps", exact(m.hyper("norm_eps", 1e-5))}};
  }
  static Builder train_graph(const ModelConfig& m) { return models::gpt(m); }
  static Builder decoder_graph(const ModelConfig& m) { return models::gpt_decoder(m); }
  static std::string describe(const ModelConfig& v) {
    if (v.mixer == layers::Mixer::ssm)
      return std::to_string(v.n_layer) + " layers, d_model " + std::to_string(v.d_model) + ", selective state-space mixers (width " +
             std::to_string(layers::ssm_width_for(v.d_model, v.ssm_state)) + ", state " + std::to_string(v.ssm_state) + "); " + describe_arch(v.arch) +
             (v.bias ? "" : ", no biases");
    std::string s = std::to_string(v.n_layer) + " layers, " + std::to_string(v.n_head) + " heads";
    if (v.kv_heads && v.kv_heads != v.n_head) s += " over " + std::to_string(v.kv_heads) + " key/value heads";
    s += ", d_model " + std::to_string(v.d_model) + "; " + describe_arch(v.arch);
    if (v.d_ff) s += ", MLP width " + std::to_string(v.d_ff);
    if (v.qk_norm) s += ", QK-norm";
    return s + (v.bias ? "" : ", no biases");
  }
};

Schema gpt_schema() {
  Schema s;
  s.choice("size", "small", {"tiny", "small", "medium"}, "preset, a bundle of sizes any size key overrides: tiny (tests), small (baby GPT), medium",
           Role::model);
  s = lm_schema(std::move(s));
  add_arch_keys(s, models::kGptSmall.arch, true, true);
  std::vector<PresetSizes> sizes;
  for (const char* n : {"tiny", "small", "medium"}) {
    const models::GptConfig& p = gpt_preset(n);
    sizes.push_back({n, p.d_model, p.n_layer, 4, p.vocab, p.context});
  }
  add_size_keys(s, sizes);
  s.integer("kv_heads", 0, {.min = 0, .max = 1024}, "architecture: key/value heads (grouped-query attention; 1: multi-query; 0: the heads)",
            Role::model)
      .flag("qk_norm", false, "architecture: RMSNorm over each head's q and k", Role::model)
      .flag("bias", true, "architecture: biases in the linear layers", Role::model)
      .choice("mixer", "attention", {"attention", "ssm"},
              "architecture: each block's token mixer, self-attention or a selective state-space layer of about its parameters (Mamba's S6)", Role::model);
  s.added_later({"kv_heads", "qk_norm", "bias", "mixer"});  // runs trained before them had the defaults
  add_common_keys(s);
  add_hyper_keys(s, GptFamily::hyper_graph());
  return s;
}

Task gpt_task() {
  Task t;
  t.name = "gpt";
  t.summary = "decoder-only LM (GPT-2 blocks) on the KJV Bible or your text (--set data=PATH), characters or BPE";
  t.schema = gpt_schema();
  t.data_parallel = true;
  t.commands.push_back({"sample", "continue a prompt with the trained model (key/value cache)", lm_sample_options()});
  t.dependent_defaults = with_shard_tokenizer(fit_context_to_model([](const Config& c) { return gpt_preset(c.text("size")).context; }));
  t.open = &open_session<LmSession<GptFamily>>;
  t.check_against_checkpoint = refuse_longer_context;
  t.input_folders = {"data", "val_data"};
  t.from_hf = lm_from_hf<GptFamily>;
  t.to_hf = lm_to_hf<GptFamily>;
  return t;
}

}  // namespace

namespace {
const bool registered = register_task(gpt_task());
}  // namespace
bool gpt_task_linked() { return registered; }

}  // namespace ctgrad::cli
