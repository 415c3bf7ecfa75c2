// The Llama of ctgrad-bench's libtorch peer (models/llama.hpp; bench/reference/llama.py): RMSNorm,
// half-split RoPE with its cos/sin tables built once, grouped-query attention (the key/value heads
// repeated to the query heads, as Hugging Face's repeat_kv; libtorch 1.13 has no fused GQA
// attention), SwiGLU, an untied head; or a mixture of SwiGLU experts, each computing its routed
// tokens (Hugging Face Mixtral's loop over the experts: index_select, the expert, index_add),
// without a capacity limit (ctgrad drops over 1.25x the mean load; at these loads rarely).
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "../bench_util.hpp"

namespace llama_peer {

namespace nn = torch::nn;
namespace F = torch::nn::functional;
using torch::Tensor;

struct RmsNormImpl : nn::Module {
  Tensor weight;
  explicit RmsNormImpl(int d) { weight = register_parameter("weight", torch::ones({d})); }
  Tensor forward(const Tensor& x) { return weight * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-5)); }
};
TORCH_MODULE(RmsNorm);

inline Tensor rotate_half(const Tensor& x) {
  const auto h = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, h), x.slice(-1, 0, h)}, -1);
}

struct AttentionImpl : nn::Module {
  int heads, kv_heads, dh;
  nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
  AttentionImpl(int d, int h, int kv) : heads(h), kv_heads(kv), dh(d / h) {
    auto lin = [&](const char* n, int in, int out) { return register_module(n, nn::Linear(nn::LinearOptions(in, out).bias(false))); };
    q = lin("q_proj", d, d), k = lin("k_proj", d, kv * dh), v = lin("v_proj", d, kv * dh), o = lin("o_proj", d, d);
  }
  // cos, sin [T, dh]; keep [T, T] bool
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& keep) {
    const auto B = x.size(0), T = x.size(1);
    Tensor qh = q(x).view({B, T, heads, dh}).transpose(1, 2), kh = k(x).view({B, T, kv_heads, dh}).transpose(1, 2);
    Tensor vh = v(x).view({B, T, kv_heads, dh}).transpose(1, 2);
    qh = qh * cos + rotate_half(qh) * sin, kh = kh * cos + rotate_half(kh) * sin;
    if (kv_heads != heads) kh = kh.repeat_interleave(heads / kv_heads, 1), vh = vh.repeat_interleave(heads / kv_heads, 1);
    Tensor att = torch::matmul(qh, kh.transpose(-2, -1)) * (1.0 / std::sqrt(double(dh)));
    att = torch::softmax(att.masked_fill(keep.logical_not(), -INFINITY), -1);
    return o(torch::matmul(att, vh).transpose(1, 2).reshape({B, T, heads * dh}));
  }
};
TORCH_MODULE(Attention);

struct MlpImpl : nn::Module {
  nn::Linear gate{nullptr}, up{nullptr}, down{nullptr};
  MlpImpl(int d, int f) {
    gate = register_module("gate_proj", nn::Linear(nn::LinearOptions(d, f).bias(false)));
    up = register_module("up_proj", nn::Linear(nn::LinearOptions(d, f).bias(false)));
    down = register_module("down_proj", nn::Linear(nn::LinearOptions(f, d).bias(false)));
  }
  Tensor forward(const Tensor& x) { return down(torch::silu(gate(x)) * up(x)); }
};
TORCH_MODULE(Mlp);

struct MoeImpl : nn::Module {
  int top_k;
  nn::Linear router{nullptr};
  std::vector<Mlp> experts;
  MoeImpl(int d, int f, int e, int k) : top_k(k) {
    router = register_module("gate", nn::Linear(nn::LinearOptions(d, e).bias(false)));
    for (int i = 0; i < e; ++i) experts.push_back(register_module("expert" + std::to_string(i), Mlp(d, f)));
  }
  Tensor forward(const Tensor& x) {
    const Tensor tokens = x.reshape({-1, x.size(-1)});
    const Tensor probs = torch::softmax(router(tokens), -1);
    auto [g, idx] = probs.topk(top_k, -1);
    g = g / g.sum(-1, true);
    Tensor y = torch::zeros_like(tokens);
    for (std::size_t e = 0; e < experts.size(); ++e) {
      const Tensor hit = (idx == int64_t(e)).nonzero();  // [n, 2]: token, choice
      if (hit.size(0) == 0) continue;
      const Tensor tok = hit.select(1, 0), choice = hit.select(1, 1);
      const Tensor w = g.index({tok, choice}).unsqueeze(1);
      y = y.index_add(0, tok, experts[e](tokens.index_select(0, tok)) * w);
    }
    return y.view_as(x);
  }
};
TORCH_MODULE(Moe);

struct LayerImpl : nn::Module {
  RmsNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
  Moe moe{nullptr};
  explicit LayerImpl(const bench::Shape& s) {
    ln_1 = register_module("input_layernorm", RmsNorm(s.d_model));
    attn = register_module("self_attn", Attention(s.d_model, s.heads, s.kv_heads));
    ln_2 = register_module("post_attention_layernorm", RmsNorm(s.d_model));
    if (s.experts) moe = register_module("mlp", Moe(s.d_model, s.d_ff, s.experts, s.top_k));
    else mlp = register_module("mlp", Mlp(s.d_model, s.d_ff));
  }
  Tensor forward(Tensor x, const Tensor& cos, const Tensor& sin, const Tensor& keep) {
    x = x + attn(ln_1(x), cos, sin, keep);
    const Tensor h = ln_2(x);
    return x + (moe ? moe(h) : mlp(h));
  }
};
TORCH_MODULE(Layer);

struct LlamaImpl : nn::Module {
  nn::Embedding embed{nullptr};
  std::vector<Layer> layers;
  RmsNorm norm{nullptr};
  nn::Linear head{nullptr};
  Tensor cos, sin, causal;
  explicit LlamaImpl(const bench::Shape& s) {
    embed = register_module("embed_tokens", nn::Embedding(s.vocab, s.d_model));
    for (int l = 0; l < s.n_layer; ++l) layers.push_back(register_module("layer" + std::to_string(l), Layer(s)));
    norm = register_module("norm", RmsNorm(s.d_model));
    head = register_module("lm_head", nn::Linear(nn::LinearOptions(s.d_model, s.vocab).bias(false)));
    const int dh = s.d_model / s.heads;
    const Tensor inv = 1.0 / torch::pow(10000.0, torch::arange(0, dh, 2, torch::kFloat) / dh);
    const Tensor f = torch::outer(torch::arange(s.seq, torch::kFloat), inv), emb = torch::cat({f, f}, -1);  // [T, dh]
    cos = emb.cos(), sin = emb.sin();
    causal = torch::ones({s.seq, s.seq}, torch::kBool).tril();
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      const std::string& n = p.key();
      if (n.find("norm") != std::string::npos) p.value().fill_(1);
      else if (n.find("o_proj") != std::string::npos || n.find("down_proj") != std::string::npos)
        p.value().normal_(0, 0.02 / std::sqrt(2.0 * s.n_layer));
      else p.value().normal_(0, 0.02);
    }
  }
  Tensor forward(const Tensor& ids, const Tensor& targets) {
    Tensor x = embed(ids);
    for (auto& l : layers) x = l(x, cos, sin, causal);
    Tensor logits = head(norm(x));
    return F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view({-1}));
  }
};
TORCH_MODULE(Llama);

}  // namespace llama_peer
