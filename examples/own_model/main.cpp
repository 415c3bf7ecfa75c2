// A decoder that is not among ctgrad's own: attention alternating between a local window (even
// layers) and the whole context (odd layers), GeGLU feed-forwards, RMSNorm, rotary positions.
// Declared here, trained with the whole ctgrad command:
//   own_model train alternating --set data=notes/ --set window=32 --run runs/a
//   own_model sample alternating --run runs/a --prompt "Once"
//   own_model ablate alternating --grid window=16,64 --grid layers=2,4
#include <ctgrad/cli/cli.hpp>
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

cli::LanguageModel alternating() {
  cli::LanguageModel m;
  m.name = "alternating";
  m.summary = "decoder with local/global attention in turn and GeGLU";
  m.keys = [](cli::Schema& s) {
    s.integer("d_model", 64, {.min = 8, .max = 4096}, "width", cli::Role::model)
        .integer("layers", 4, {.min = 1, .max = 64}, "blocks: even ones local, odd ones global", cli::Role::model)
        .integer("heads", 4, {.min = 1, .max = 64}, "attention heads", cli::Role::model)
        .integer("window", 16, {.min = 1, .max = 1 << 16}, "positions a local layer sees", cli::Role::model);
  };
  m.logits = [](Builder& g, Value ids, const cli::Config& c, int vocab, int) {
    using namespace layers;
    const int d = int(c.integer("d_model")), heads = int(c.integer("heads"));
    const NormOptions rms{.kind = NormKind::rms};
    Value x = embedding(g.scope("embed"), ids, vocab, d, {.init = init::normal(0.02)});  // [B, T, d]
    for (int l = 0; l < c.integer("layers"); ++l) {
      const Scope b = g.scope("layers", l);
      const MultiHeadAttentionOptions attention{.heads = heads, .causal = true, .bias = false, .init = init::normal(0.02),
                                                .rope = RopeOptions{.theta = 10000}, .window = l % 2 == 0 ? int(c.integer("window")) : 0};
      x = x + multi_head_attention(b.scope("attn"), {.q = norm(b.scope("attn_norm"), x, rms)}, attention).out;
      x = x + feed_forward(b.scope("mlp"), norm(b.scope("mlp_norm"), x, rms),
                           {.d_ff = gated_width(4 * d), .activation = Act::gated_gelu, .bias = false, .init = init::normal(0.02)});
    }
    return linear(g.scope("head"), norm(g.scope("norm"), x, rms), vocab, {.bias = false});  // [B, T, vocab]
  };
  return m;
}

int main(int argc, char** argv) { return cli::main(argc, argv, {cli::language_model(alternating())}); }
