// The libtorch peer of ctgrad-bench: the benchmark models written in PyTorch's C++ frontend (the
// Llama in libtorch_llama.hpp)
// (Debian libtorch-dev 1.13), same architecture, init scheme, optimizer, threads and data as the
// ctgrad side (bench/train_bench.cpp). ctgrad-bench starts it and asks it for steps (the protocol:
// serve() below). Written the way a libtorch user would at their best: fused QKV where ctgrad
// fuses it, masks built once, no autograd on the data.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "../bench_util.hpp"
#include "libtorch_llama.hpp"

namespace nn = torch::nn;
namespace F = torch::nn::functional;
using torch::Tensor;

namespace {

// Self- or cross-attention; fused: one [3d, d] projection (GPT), else wq/wk/wv (ViT, Transformer).
struct AttentionImpl : nn::Module {
  int heads;
  bool fused;
  nn::Linear qkv{nullptr}, wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  AttentionImpl(int d, int h, bool fuse) : heads(h), fused(fuse) {
    if (fused) qkv = register_module("qkv", nn::Linear(d, 3 * d));
    else wq = register_module("wq", nn::Linear(d, d)), wk = register_module("wk", nn::Linear(d, d)), wv = register_module("wv", nn::Linear(d, d));
    wo = register_module("wo", nn::Linear(d, d));
  }
  // keep: bool, broadcasting to [B, heads, Tq, Tk]; undefined: no mask
  Tensor forward(const Tensor& x, const Tensor& kv, const Tensor& keep) {
    const auto B = x.size(0), Tq = x.size(1), d = x.size(2), Tk = kv.size(1), dh = d / heads;
    Tensor q, k, v;
    if (fused) {
      auto p = qkv(x).split(d, 2);
      q = p[0], k = p[1], v = p[2];
    } else {
      q = wq(x), k = wk(kv), v = wv(kv);
    }
    q = q.view({B, Tq, heads, dh}).transpose(1, 2);
    k = k.view({B, Tk, heads, dh}).transpose(1, 2);
    v = v.view({B, Tk, heads, dh}).transpose(1, 2);
    Tensor att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(dh)));
    if (keep.defined()) att = att.masked_fill(keep.logical_not(), -INFINITY);
    att = torch::softmax(att, -1);
    return wo(torch::matmul(att, v).transpose(1, 2).reshape({B, Tq, d}));
  }
};
TORCH_MODULE(Attention);

struct MlpImpl : nn::Module {
  nn::Linear fc1{nullptr}, fc2{nullptr};
  std::string act;
  MlpImpl(int d, int f, std::string a) : act(std::move(a)) {
    fc1 = register_module("fc1", nn::Linear(d, f));
    fc2 = register_module("fc2", nn::Linear(f, d));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = fc1(x);
    h = act == "relu" ? torch::relu(h) : act == "gelu_tanh" ? torch::gelu(h, "tanh") : torch::gelu(h);
    return fc2(h);
  }
};
TORCH_MODULE(Mlp);

// Pre-norm block (GPT, ViT).
struct BlockImpl : nn::Module {
  nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
  BlockImpl(int d, int h, int f, bool fused, const std::string& act) {
    ln_1 = register_module("ln_1", nn::LayerNorm(nn::LayerNormOptions({d})));
    attn = register_module("attn", Attention(d, h, fused));
    ln_2 = register_module("ln_2", nn::LayerNorm(nn::LayerNormOptions({d})));
    mlp = register_module("mlp", Mlp(d, f, act));
  }
  Tensor forward(Tensor x, const Tensor& keep) {
    Tensor a = ln_1(x);
    x = x + attn(a, a, keep);
    return x + mlp(ln_2(x));
  }
};
TORCH_MODULE(Block);

// GPT-2 (models/gpt.hpp; bench/reference/gpt.py): tied output, causal mask built once.
struct GptImpl : nn::Module {
  nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<Block> h;
  nn::LayerNorm ln_f{nullptr};
  Tensor causal, positions;
  GptImpl(const bench::Shape& s) {
    wte = register_module("wte", nn::Embedding(s.vocab, s.d_model));
    wpe = register_module("wpe", nn::Embedding(s.seq, s.d_model));
    for (int l = 0; l < s.n_layer; ++l) h.push_back(register_module("h" + std::to_string(l), Block(s.d_model, s.heads, s.d_ff, true, "gelu_tanh")));
    ln_f = register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({s.d_model})));
    causal = torch::ones({s.seq, s.seq}, torch::kBool).tril();
    positions = torch::arange(s.seq, torch::kLong);
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      const std::string& n = p.key();
      if (n.find("bias") != std::string::npos) p.value().zero_();
      else if (n.find("ln_") != std::string::npos) p.value().fill_(1);
      else if (n.find("attn.wo.weight") != std::string::npos || n.find("mlp.fc2.weight") != std::string::npos)
        p.value().normal_(0, 0.02 / std::sqrt(2.0 * s.n_layer));
      else p.value().normal_(0, 0.02);
    }
  }
  Tensor forward(const Tensor& ids, const Tensor& targets) {
    Tensor x = wte(ids) + wpe(positions);
    for (auto& b : h) x = b(x, causal);
    Tensor logits = torch::matmul(ln_f(x), wte->weight.t());
    return F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view({-1}));
  }
};
TORCH_MODULE(Gpt);

// ctgrad's linear layers: Xavier-uniform weights, zero biases (models/layers/linear.hpp).
void xavier_linears(nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& child : m.modules(/*include_self=*/false))
    if (auto* l = child->as<nn::Linear>()) {
      nn::init::xavier_uniform_(l->weight);
      l->bias.zero_();
    }
}

// ViT (models/vit.hpp): conv patch embedding, <cls>, learned positions, pre-norm blocks.
struct VitImpl : nn::Module {
  nn::Conv2d patch{nullptr};
  Tensor cls, pos;
  std::vector<Block> blocks;
  nn::LayerNorm head_norm{nullptr};
  nn::Linear head{nullptr};
  VitImpl(const bench::Shape& s) {
    patch = register_module("patch_embed", nn::Conv2d(nn::Conv2dOptions(1, s.d_model, s.patch).stride(s.patch)));
    cls = register_parameter("cls", torch::zeros({1, 1, s.d_model}));
    pos = register_parameter("pos", torch::randn({1, s.seq, s.d_model}) * 0.02);
    for (int l = 0; l < s.n_layer; ++l) blocks.push_back(register_module("vit" + std::to_string(l), Block(s.d_model, s.heads, s.d_ff, false, "gelu")));
    head_norm = register_module("head_norm", nn::LayerNorm(nn::LayerNormOptions({s.d_model})));
    head = register_module("head", nn::Linear(s.d_model, s.classes));
    xavier_linears(*this);
    torch::NoGradGuard no_grad;
    const double bound = std::sqrt(6.0 / (s.patch * s.patch + s.d_model));  // Xavier of the [d, p*p] matrix ctgrad holds
    patch->weight.uniform_(-bound, bound);
    patch->bias.zero_();
  }
  Tensor forward(const Tensor& images, const Tensor& labels) {
    Tensor x = patch(images).flatten(2).transpose(1, 2);  // [B, N, d]
    x = torch::cat({cls.expand({x.size(0), 1, x.size(2)}), x}, 1) + pos;
    for (auto& b : blocks) x = b(x, Tensor());
    Tensor logits = head(head_norm(x.select(1, 0)));
    return F::cross_entropy(logits, labels);
  }
};
TORCH_MODULE(Vit);

// Post-norm encoder-decoder (models/transformer.hpp; bench/reference/transformer.py).
struct EncoderLayerImpl : nn::Module {
  Attention self{nullptr};
  Mlp ffn{nullptr};
  nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  EncoderLayerImpl(int d, int h, int f) {
    self = register_module("self", Attention(d, h, false));
    ln_1 = register_module("ln_1", nn::LayerNorm(nn::LayerNormOptions({d})));
    ffn = register_module("ffn", Mlp(d, f, "relu"));
    ln_2 = register_module("ln_2", nn::LayerNorm(nn::LayerNormOptions({d})));
  }
  Tensor forward(Tensor x, const Tensor& keep) {
    x = ln_1(x + self(x, x, keep));
    return ln_2(x + ffn(x));
  }
};
TORCH_MODULE(EncoderLayer);

struct DecoderLayerImpl : nn::Module {
  Attention self{nullptr}, cross{nullptr};
  Mlp ffn{nullptr};
  nn::LayerNorm ln_1{nullptr}, ln_2{nullptr}, ln_3{nullptr};
  DecoderLayerImpl(int d, int h, int f) {
    self = register_module("self", Attention(d, h, false));
    ln_1 = register_module("ln_1", nn::LayerNorm(nn::LayerNormOptions({d})));
    cross = register_module("cross", Attention(d, h, false));
    ln_2 = register_module("ln_2", nn::LayerNorm(nn::LayerNormOptions({d})));
    ffn = register_module("ffn", Mlp(d, f, "relu"));
    ln_3 = register_module("ln_3", nn::LayerNorm(nn::LayerNormOptions({d})));
  }
  Tensor forward(Tensor y, const Tensor& memory, const Tensor& self_keep, const Tensor& src_keep) {
    y = ln_1(y + self(y, y, self_keep));
    y = ln_2(y + cross(y, memory, src_keep));
    return ln_3(y + ffn(y));
  }
};
TORCH_MODULE(DecoderLayer);

Tensor sinusoidal(int T, int d) {
  Tensor p = torch::arange(T, torch::kDouble).unsqueeze(1);
  Tensor w = torch::exp(torch::arange(0, d, 2, torch::kDouble) * (-std::log(10000.0) / d));
  Tensor pe = torch::zeros({T, d}, torch::kDouble);
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)}, torch::sin(p * w));
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)}, torch::cos(p * w));
  return pe.to(torch::kFloat);
}

struct TransformerImpl : nn::Module {
  nn::Embedding emb{nullptr};
  std::vector<EncoderLayer> enc;
  std::vector<DecoderLayer> dec;
  double scale, label_smoothing;
  Tensor pe, causal;
  TransformerImpl(const bench::Shape& s) : scale(std::sqrt(double(s.d_model))), label_smoothing(s.label_smoothing) {
    emb = register_module("emb", nn::Embedding(s.vocab, s.d_model));
    for (int l = 0; l < s.n_layer; ++l) {
      enc.push_back(register_module("enc" + std::to_string(l), EncoderLayer(s.d_model, s.heads, s.d_ff)));
      dec.push_back(register_module("dec" + std::to_string(l), DecoderLayer(s.d_model, s.heads, s.d_ff)));
    }
    pe = sinusoidal(s.seq, s.d_model);
    causal = torch::ones({s.seq, s.seq}, torch::kBool).tril();
    xavier_linears(*this);
    torch::NoGradGuard no_grad;
    emb->weight.normal_(0, 1 / scale);
  }
  Tensor forward(const Tensor& src, const Tensor& src_len, const Tensor& tgt_in, const Tensor& tgt_len, const Tensor& tgt_out) {
    const auto S = src.size(1), T = tgt_in.size(1);
    Tensor src_keep = (torch::arange(S).unsqueeze(0) < src_len.unsqueeze(1)).unsqueeze(1).unsqueeze(1);  // [B, 1, 1, S]
    Tensor tgt_keep = (torch::arange(T).unsqueeze(0) < tgt_len.unsqueeze(1)).unsqueeze(1).unsqueeze(1);
    Tensor x = emb(src) * scale + pe.slice(0, 0, S);
    for (auto& l : enc) x = l(x, src_keep);
    Tensor y = emb(tgt_in) * scale + pe.slice(0, 0, T);
    Tensor self_keep = tgt_keep.logical_and(causal.slice(0, 0, T).slice(1, 0, T));
    for (auto& l : dec) y = l(y, x, self_keep, src_keep);
    Tensor logits = torch::matmul(y, emb->weight.t());
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), tgt_out.reshape({-1}),
                            F::CrossEntropyFuncOptions().ignore_index(0).label_smoothing(label_smoothing));
  }
};
TORCH_MODULE(Transformer);

// Bahdanau's encoder-decoder (models/seq2seq.hpp; bench/reference/seq2seq.py, d2l 11.4): a GRU
// encoder, a decoder looping over the target steps, each attending additively from its top state.
struct Seq2SeqImpl : nn::Module {
  nn::Embedding enc_emb{nullptr}, dec_emb{nullptr};
  nn::GRU enc_rnn{nullptr}, dec_rnn{nullptr};
  nn::Linear W_k{nullptr}, W_q{nullptr}, w_v{nullptr}, dense{nullptr};
  Seq2SeqImpl(const bench::Shape& s) {
    const int E = s.d_ff, H = s.d_model;
    enc_emb = register_module("enc_emb", nn::Embedding(s.vocab, E));
    enc_rnn = register_module("enc_rnn", nn::GRU(nn::GRUOptions(E, H).num_layers(s.n_layer).batch_first(true)));
    W_k = register_module("W_k", nn::Linear(nn::LinearOptions(H, H).bias(false)));
    W_q = register_module("W_q", nn::Linear(nn::LinearOptions(H, H).bias(false)));
    w_v = register_module("w_v", nn::Linear(nn::LinearOptions(H, 1).bias(false)));
    dec_emb = register_module("dec_emb", nn::Embedding(s.vocab, E));
    dec_rnn = register_module("dec_rnn", nn::GRU(nn::GRUOptions(E + H, H).num_layers(s.n_layer).batch_first(true)));
    dense = register_module("dense", nn::Linear(H, s.vocab));
  }
  Tensor forward(const Tensor& src, const Tensor& src_len, const Tensor& tgt_in, const Tensor& tgt_out) {
    auto [memory, state] = enc_rnn(enc_emb(src));
    const Tensor keys = W_k(memory), y = dec_emb(tgt_in);
    const Tensor keep = (torch::arange(src.size(1)).unsqueeze(0) < src_len.unsqueeze(1)).unsqueeze(1);  // [B, 1, S]
    std::vector<Tensor> outs;
    for (std::int64_t t = 0; t < tgt_in.size(1); ++t) {
      const Tensor q = W_q(state[-1]).unsqueeze(1);                                   // [B, 1, H]
      const Tensor scores = w_v(torch::tanh(q.unsqueeze(2) + keys.unsqueeze(1))).squeeze(-1);  // [B, 1, S]
      const Tensor context = torch::bmm(torch::softmax(scores.masked_fill(keep.logical_not(), -1e6), -1), memory);
      auto [out, next] = dec_rnn(torch::cat({context, y.slice(1, t, t + 1)}, -1), state);
      outs.push_back(out);
      state = next;
    }
    const Tensor logits = dense(torch::cat(outs, 1));
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), tgt_out.reshape({-1}), F::CrossEntropyFuncOptions().ignore_index(0));
  }
};
TORCH_MODULE(Seq2Seq);

Tensor ints(const std::vector<std::int32_t>& v, std::vector<std::int64_t> shape) {
  return torch::from_blob(const_cast<std::int32_t*>(v.data()), shape, torch::kInt).to(torch::kLong);
}

// The OpenBLAS this process runs with, from its memory map: the peer's configuration, printed.
std::string loaded_blas() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libopenblas") != std::string::npos) return line.substr(line.find('/'));
  return "unknown";
}

// AdamW with ctgrad's no_decay_group: no decay on biases and norms (what is 2-D and not a norm
// is decayed, including the position tables and <cls>, as in ctgrad); clipping at 1 by the caller.
template <class M>
torch::optim::AdamW make_optimizer(M& model) {
  std::vector<Tensor> decay, no_decay;
  for (auto& p : model->named_parameters())
    (p.value().dim() >= 2 && p.key().find("ln_") == std::string::npos ? decay : no_decay).push_back(p.value());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(3e-4).weight_decay(0.1)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(3e-4).weight_decay(0)));
  return torch::optim::AdamW(std::move(groups), torch::optim::AdamWOptions(3e-4));
}

// Serves "steps N" lines from stdin (until "quit" or end of input), answering each with one
// JSON line: the time of each step, heap allocations, first and last loss, peak RSS so far.
template <class M, class Loss>
int serve(M model, const bench::Shape& s, bool bf16, Loss loss_of) {
  auto opt = make_optimizer(model);
  const bench::Batches data(s, 8);
  const std::string blas = loaded_blas();
  std::vector<double> ms;
  std::string cmd;
  int n = 0, step = 0;
  while (std::cin >> cmd && cmd == "steps" && std::cin >> n) {
    ms.clear();
    ms.reserve(std::size_t(n));
    long long allocs = 0;
    double first = 0, last = 0;
    for (int i = 0; i < n; ++i, ++step) {
      const long long a0 = bench::heap_allocations();
      const double t0 = bench::now();
      opt.zero_grad();
      // --precision bf16: libtorch's CPU autocast (bf16 matmuls through oneDNN, fp32 weights and optimizer).
      at::autocast::set_cpu_enabled(bf16);
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      Tensor loss = loss_of(model, data.at(step));
      at::autocast::set_cpu_enabled(false);
      at::autocast::clear_cache();
      loss.backward();
      nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      opt.step();
      const double v = loss.item<double>();
      const double t = bench::now() - t0;
      allocs += bench::heap_allocations() - a0;
      ms.push_back(1e3 * t);
      if (i == 0) first = v;
      last = v;
    }
    std::string out = std::string("{\"impl\":\"libtorch\",\"precision\":\"") + (bf16 ? "bf16 autocast" : "fp32") + "\",\"blas\":\"" + blas + "\",\"torch_threads\":" + std::to_string(torch::get_num_threads()) +
                      ",\"step_ms\":[";
    for (std::size_t i = 0; i < ms.size(); ++i) out += (i ? "," : "") + std::to_string(ms[i]);
    auto number = [](double v) { return std::isfinite(v) ? std::to_string(v) : std::string("null"); };  // JSON has no NaN
    out += "],\"allocs\":" + std::to_string(allocs) + ",\"loss_first\":" + number(first) + ",\"loss_last\":" + number(last) +
           ",\"peak_rss_mb\":" + std::to_string(bench::peak_rss_mb()) + "}";
    std::printf("%s\n", out.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string model = argv[1];
  std::string config = "small";
  int threads = 2;
  bool bf16 = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) config = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--precision" && i + 1 < argc) bf16 = std::string(argv[++i]) == "bf16";
    else if (a != "--serve") {
      std::fprintf(stderr, "ctgrad-bench-libtorch: unknown option '%s' (run by ctgrad-bench --peer libtorch)\n", a.c_str());
      return 2;
    }
  }
  bench::Shape s;
  if (!bench::shape_of(model, config, s)) {
    std::fprintf(stderr, "ctgrad-bench-libtorch: no config %s for %s\n", config.c_str(), model.c_str());
    return 2;
  }
  torch::set_num_threads(threads);
  torch::manual_seed(1);
  const std::int64_t B = s.batch, T = s.seq;
  if (model == "gpt")
    return serve(Gpt(s), s, bf16, [&](Gpt& m, const bench::Batch& b) { return m(ints(b.ids, {B, T}), ints(b.targets, {B, T})); });
  if (model == "llama")
    return serve(llama_peer::Llama(s), s, bf16,
                 [&](llama_peer::Llama& m, const bench::Batch& b) { return m(ints(b.ids, {B, T}), ints(b.targets, {B, T})); });
  if (model == "vit")
    return serve(Vit(s), s, bf16, [&](Vit& m, const bench::Batch& b) {
      return m(torch::from_blob(const_cast<float*>(b.images.data()), {B, 1, s.image, s.image}), ints(b.labels, {B}));
    });
  if (model == "seq2seq")
    return serve(Seq2Seq(s), s, bf16, [&](Seq2Seq& m, const bench::Batch& b) {
      return m(ints(b.ids, {B, T}), ints(b.lengths, {B}), ints(b.tgt_in, {B, T}), ints(b.targets, {B, T}));
    });
  return serve(Transformer(s), s, bf16, [&](Transformer& m, const bench::Batch& b) {
    return m(ints(b.ids, {B, T}), ints(b.lengths, {B}), ints(b.tgt_in, {B, T}), ints(b.lengths, {B}), ints(b.targets, {B, T}));
  });
}
