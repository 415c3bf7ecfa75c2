// ctgrad train|eval|sample gpt: the GPT on the KJV Bible (docs/models/gpt.md). The default run is
// nanoGPT's "baby GPT" CPU recipe on the KJV text, characters as tokens. The session is every
// decoder-only family's (lm_session.hpp); this file is the GPT's traits and keys.
#include <ctgrad/models/gpt.hpp>

#include "../variants/gpt.hpp"
#include "lm_session.hpp"

namespace ctgrad::cli {
namespace {

struct GptFamily {
  using ModelConfig = models::GptConfig;
  using Programs = GptPrograms;
  using Sampler = models::GptSampler;
  static constexpr const char* name = "gpt";
  // The preset's graph: its hyperparameters are every variant's.
  static constexpr auto hyper_graph = freeze<models::gpt<models::kGptSmall>>();
  template <ModelConfig P, int Order>
  static const Programs& programs(const Config& c) {
    return find_variant<GptPrograms>("gpt", "size=" + c.text("size"), c, gpt_space<P, Order>, P.n_head);
  }
  static std::string describe(const ModelConfig& v) {
    if (v.mixer == layers::Mixer::ssm)
      return std::to_string(v.n_layer) + " layers, d_model " + std::to_string(v.d_model) + ", selective state-space mixers (width " +
             std::to_string(layers::ssm_width_for(v.d_model, v.ssm_state)) + ", state " + std::to_string(v.ssm_state) + "); " + describe_arch(v.arch) +
             (v.bias ? "" : ", no biases");
    std::string s = std::to_string(v.n_layer) + " layers, " + std::to_string(v.n_head) + " heads";
    if (v.kv_heads && v.kv_heads != v.n_head) s += " over " + std::to_string(v.kv_heads) + " key/value heads";
    s += ", d_model " + std::to_string(v.d_model) + "; " + describe_arch(v.arch);
    if (v.qk_norm) s += ", QK-norm";
    return s + (v.bias ? "" : ", no biases");
  }
};

Schema gpt_schema() {
  Schema s;
  s.choice("size", "small", {"tiny", "small", "medium"}, "preset: tiny (tests), small (baby GPT), medium", Role::model);
  s = lm_schema(std::move(s));
  add_arch_keys(s, models::kGptSmall.arch, true, true);
  s.integer("kv_heads", 0, {.min = 0, .max = 1024}, "architecture: key/value heads (grouped-query attention; 1: multi-query; 0: the heads)",
            Role::model)
      .flag("qk_norm", false, "architecture: RMSNorm over each head's q and k", Role::model)
      .flag("bias", true, "architecture: biases in the linear layers", Role::model)
      .choice("mixer", "attention", {"attention", "ssm"},
              "architecture: each block's token mixer, self-attention or a selective state-space layer of about its parameters (Mamba's S6)", Role::model);
  s.added_later({"kv_heads", "qk_norm", "bias", "mixer"});  // runs trained before them had the defaults
  add_common_keys(s);
  add_hyper_keys(s, GptFamily::hyper_graph);
  return s;
}

template <models::GptConfig P, int Order>
using GptSession = LmSession<GptFamily, P, Order>;

Task gpt_task() {
  Task t;
  t.name = "gpt";
  t.summary = "decoder-only LM (GPT-2 blocks) on the KJV Bible, characters or BPE";
  t.schema = gpt_schema();
  t.data_parallel = true;
  t.commands.push_back({"sample", "continue a prompt with the trained model (key/value cache)", lm_sample_options()});
  t.dependent_defaults = fit_context_by_size({{"tiny", models::kGptTiny.context}, {"small", models::kGptSmall.context}, {"medium", models::kGptMedium.context}});
  t.open = open_presets("gpt", "size",
                        {{"size=tiny", &open_session<GptSession<models::kGptTiny, kGptOrderTiny>>} CTGRAD_UNLESS_SMOKE(
                            , {"size=small", &open_session<GptSession<models::kGptSmall, kGptOrderSmall>>},
                            {"size=medium", &open_session<GptSession<models::kGptMedium, kGptOrderMedium>>})});
  t.check_against_checkpoint = refuse_longer_context;
  return t;
}

const bool registered = register_task(gpt_task());

}  // namespace
}  // namespace ctgrad::cli
