// Loads a Hugging Face model folder written by bench/reference/hf_models.py and compares ctgrad's
// logits and greedy continuation (decoded with the key/value cache) with the reference's
// expected.safetensors; then exports the loaded model (save_hf_model), loads the export and
// requires bit-identical logits. Prints the figures; exit 1 on a mismatch.
//   hf_parity_check FOLDER EXPORT_FOLDER
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/models/bert.hpp>
#include <ctgrad/models/gpt.hpp>
#include <ctgrad/models/llama.hpp>
#include <ctgrad/models/t5.hpp>
#include <ctgrad/models/vit.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

namespace {

using namespace ctgrad;
namespace fs = std::filesystem;

struct Loaded {
  pretrained::HfModel m;
  std::unique_ptr<Program<run_time>> model;
};

Loaded load(const fs::path& dir) {
  Loaded l{pretrained::read_hf_model(dir), nullptr};
  const Options opts{.threads = 2, .hypers = l.m.hypers};
  l.model = std::make_unique<Program<run_time>>(
      freeze(l.m.is_gpt()    ? models::gpt(l.m.gpt())
             : l.m.is_bert() ? models::bert_mlm(l.m.bert())
             : l.m.is_vit()  ? models::vit(l.m.vit())
             : l.m.is_t5()   ? models::t5(l.m.t5())
                             : models::llama(l.m.llama())),
      opts);
  pretrained::load_hf_weights(dir, l.m, l.model->parameters());
  return l;
}

std::vector<float> logits_of(Loaded& l, const std::vector<std::int32_t>& ids) {
  const std::int64_t T = std::int64_t(ids.size());
  const std::vector<std::int32_t> zeros(ids.size(), 0);
  l.model->set_input("ids", std::span<const std::int32_t>(ids), {1, T});
  l.model->set_input("targets", std::span<const std::int32_t>(zeros), {1, T});
  l.model->forward(Mode::infer);
  const auto out = l.model->output("logits");
  return {out.data, out.data + out.numel};
}

std::vector<std::int32_t> greedy(Loaded& l, std::vector<std::int32_t> tokens, int n) {
  const Options opts{.threads = 2, .hypers = l.m.hypers};
  std::unique_ptr<models::LmSampler> s;
  if (l.m.is_gpt())
    s = std::make_unique<models::GptSampler>(std::make_unique<Program<run_time>>(freeze(models::gpt_decoder(l.m.gpt())), opts), l.m.gpt(),
                                             l.model->parameters());
  else
    s = std::make_unique<models::LlamaSampler>(std::make_unique<Program<run_time>>(freeze(models::llama_decoder(l.m.llama())), opts), l.m.llama(),
                                               l.model->parameters());
  const std::size_t start = tokens.size();
  const int vocab = l.m.is_gpt() ? l.m.gpt().vocab : l.m.llama().vocab;
  s->generate(tokens, vocab, models::SamplingOptions{.temperature = 0, .max_tokens = n}, [](std::int32_t) {});
  return {tokens.begin() + std::ptrdiff_t(start), tokens.end()};
}

// BERT: logits at every position (the masked-LM head over all of them), and the next-sentence
// head's when the model has it.
std::vector<float> bert_logits(Loaded& l, const checkpoint::File& e, std::vector<float>* nsp) {
  const auto& shape = e.tensor("ids").shape;  // [B, T]
  const std::int64_t B = shape[0], T = shape[1];
  std::vector<std::int32_t> ids(std::size_t(B * T)), segments(ids.size()), lengths(static_cast<std::size_t>(B)), picks(ids.size()), zeros(ids.size(), 0);
  e.read<std::int32_t>("ids", ids, shape);
  e.read<std::int32_t>("segments", segments, shape);
  e.read<std::int32_t>("lengths", lengths, e.tensor("lengths").shape);
  for (std::size_t i = 0; i < picks.size(); ++i) picks[i] = std::int32_t(i);
  l.model->set_input("ids", std::span<const std::int32_t>(ids), {B, T});
  l.model->set_input("segments", std::span<const std::int32_t>(segments), {B, T});
  l.model->set_input("lengths", std::span<const std::int32_t>(lengths), {B});
  l.model->set_input("picks", std::span<const std::int32_t>(picks), {B * T});
  l.model->set_input("targets", std::span<const std::int32_t>(zeros), {B * T});
  if (l.m.bert().next_sentence) l.model->set_input("labels", std::span<const std::int32_t>(zeros).first(std::size_t(B)), {B});
  l.model->forward(Mode::infer);
  if (nsp) {
    const auto n = l.model->output("nsp_logits");
    nsp->assign(n.data, n.data + n.numel);
  }
  const auto out = l.model->output("logits");
  return {out.data, out.data + out.numel};
}

double relative(const std::vector<float>& got, const std::vector<float>& want, double* diff = nullptr) {
  double d = 0, scale = 0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) d = std::max(d, double(std::fabs(got[i] - want[i]))), scale = std::max(scale, double(std::fabs(want[i])));
  if (diff) *diff = d;
  return got.size() == want.size() ? d / scale : 1e30;
}

int check_bert(const fs::path& dir, const fs::path& exported, const checkpoint::File& e) {
  Loaded l = load(dir);
  std::vector<float> want(std::size_t(e.tensor("logits").shape[0] * e.tensor("logits").shape[1])), nsp, want_nsp;
  e.read<float>("logits", want, e.tensor("logits").shape);
  const bool with_nsp = e.has("nsp");
  if (with_nsp) want_nsp.resize(std::size_t(e.tensor("nsp").shape[0] * 2)), e.read<float>("nsp", want_nsp, e.tensor("nsp").shape);
  const std::vector<float> got = bert_logits(l, e, with_nsp ? &nsp : nullptr);
  double diff = 0;
  const double rel = relative(got, want, &diff);
  const std::int64_t V = e.tensor("logits").shape[1];
  std::size_t same = 0, rows = got.size() / std::size_t(V);
  for (std::size_t r = 0; r < rows; ++r)
    same += std::max_element(got.begin() + std::ptrdiff_t(r * V), got.begin() + std::ptrdiff_t((r + 1) * V)) - got.begin() ==
            std::max_element(want.begin() + std::ptrdiff_t(r * V), want.begin() + std::ptrdiff_t((r + 1) * V)) - want.begin();
  std::printf("%s (%s): logits max |diff| %.3g, relative %.3g; the top token at %zu of %zu positions as the reference", dir.filename().c_str(),
              l.m.architecture.c_str(), diff, rel, same, rows);
  bool ok = rel <= 1e-5 && same == rows;
  if (with_nsp) {
    const double r = relative(nsp, want_nsp);
    std::printf("; next-sentence logits relative %.3g", r);
    ok = ok && r <= 1e-5;
  }
  std::printf("\n");
  pretrained::save_hf_model(exported, l.m, l.model->parameters());
  Loaded back = load(exported);
  const std::vector<float> again = bert_logits(back, e, nullptr);
  const bool identical = again.size() == got.size() && std::memcmp(again.data(), got.data(), 4 * got.size()) == 0;
  std::printf("  exported to %s and loaded back: logits %s\n", exported.c_str(), identical ? "bit-identical" : "DIFFER");
  return ok && identical ? 0 : 1;
}

// ViT: the classifier's logits of a few images.
std::vector<float> vit_logits(Loaded& l, const checkpoint::File& e) {
  const auto& shape = e.tensor("images").shape;  // [B, C, H, W]
  std::vector<float> images(std::size_t(shape[0] * shape[1] * shape[2] * shape[3]));
  e.read<float>("images", images, shape);
  const std::vector<std::int32_t> labels(std::size_t(shape[0]), 0);
  l.model->set_input("images", std::span<const float>(images), shape);
  l.model->set_input("labels", std::span<const std::int32_t>(labels), {shape[0]});
  l.model->forward(Mode::infer);
  const auto out = l.model->output("logits");
  return {out.data, out.data + out.numel};
}

int check_vit(const fs::path& dir, const fs::path& exported, const checkpoint::File& e) {
  Loaded l = load(dir);
  std::vector<float> want(std::size_t(e.tensor("logits").shape[0] * e.tensor("logits").shape[1]));
  e.read<float>("logits", want, e.tensor("logits").shape);
  const std::vector<float> got = vit_logits(l, e);
  double diff = 0;
  const double rel = relative(got, want, &diff);
  std::printf("%s (%s): logits max |diff| %.3g, relative %.3g\n", dir.filename().c_str(), l.m.architecture.c_str(), diff, rel);
  pretrained::save_hf_model(exported, l.m, l.model->parameters());
  Loaded back = load(exported);
  const std::vector<float> again = vit_logits(back, e);
  const bool identical = again.size() == got.size() && std::memcmp(again.data(), got.data(), 4 * got.size()) == 0;
  std::printf("  exported to %s and loaded back: logits %s\n", exported.c_str(), identical ? "bit-identical" : "DIFFER");
  return rel <= 1e-5 && identical ? 0 : 1;
}

// T5: the decoder's logits at every target position of a batch of padded sources.
std::vector<float> t5_logits(Loaded& l, std::vector<std::int32_t> src, std::vector<std::int32_t> src_len, std::vector<std::int32_t> tgt_in) {
  const std::int64_t B = std::int64_t(src_len.size()), S = std::int64_t(src.size()) / B, T = std::int64_t(tgt_in.size()) / B;
  const std::vector<std::int32_t> tgt_out(tgt_in.size(), 1);  // not the padding: the loss is defined (and unused)
  l.model->set_input("src", std::span<const std::int32_t>(src), {B, S});
  l.model->set_input("src_len", std::span<const std::int32_t>(src_len), {B});
  l.model->set_input("tgt_in", std::span<const std::int32_t>(tgt_in), {B, T});
  l.model->set_input("tgt_out", std::span<const std::int32_t>(tgt_out), {B, T});
  l.model->forward(Mode::infer);
  const auto out = l.model->output("logits");
  return {out.data, out.data + out.numel};
}

int check_t5(const fs::path& dir, const fs::path& exported, const checkpoint::File& e) {
  Loaded l = load(dir);
  auto ints = [&](const char* name) {
    const auto& shape = e.tensor(name).shape;
    std::size_t n = 1;
    for (const auto d : shape) n *= std::size_t(d);
    std::vector<std::int32_t> v(n);
    e.read<std::int32_t>(name, v, shape);
    return v;
  };
  const auto src = ints("src"), src_len = ints("src_len"), tgt_in = ints("tgt_in"), want_greedy = ints("greedy");
  std::vector<float> want(std::size_t(e.tensor("logits").shape[0] * e.tensor("logits").shape[1]));
  e.read<float>("logits", want, e.tensor("logits").shape);
  const std::vector<float> got = t5_logits(l, src, src_len, tgt_in);
  double diff = 0;
  const double rel = relative(got, want, &diff);
  // Greedy from the decoder's start on row 0's source, the whole target re-read each step.
  const std::int64_t S = std::int64_t(src.size() / src_len.size()), V = l.m.t5().vocab;
  const std::vector<std::int32_t> src0(src.begin(), src.begin() + S);
  std::vector<std::int32_t> seq{std::int32_t(l.m.t5().pad)};
  for (std::size_t k = 0; k < want_greedy.size(); ++k) {
    const std::vector<float> lg = t5_logits(l, src0, {src_len[0]}, seq);
    const float* last = lg.data() + (std::int64_t(seq.size()) - 1) * V;
    seq.push_back(std::int32_t(std::max_element(last, last + V) - last));
  }
  std::size_t same = 0;
  while (same < want_greedy.size() && seq[same + 1] == want_greedy[same]) ++same;
  std::printf("%s (%s): logits max |diff| %.3g, relative %.3g; greedy: %zu of %zu tokens as the reference\n", dir.filename().c_str(),
              l.m.architecture.c_str(), diff, rel, same, want_greedy.size());
  pretrained::save_hf_model(exported, l.m, l.model->parameters());
  Loaded back = load(exported);
  const std::vector<float> again = t5_logits(back, src, src_len, tgt_in);
  const bool identical = again.size() == got.size() && std::memcmp(again.data(), got.data(), 4 * got.size()) == 0;
  std::printf("  exported to %s and loaded back: logits %s\n", exported.c_str(), identical ? "bit-identical" : "DIFFER");
  return rel <= 1e-5 && same == want_greedy.size() && identical ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: hf_parity_check FOLDER EXPORT_FOLDER\n");
    return 2;
  }
  try {
    const fs::path dir = argv[1], exported = argv[2];
    const checkpoint::File expected(dir / "expected.safetensors");
    if (expected.has("segments")) return check_bert(dir, exported, expected);
    if (expected.has("images")) return check_vit(dir, exported, expected);
    if (expected.has("src")) return check_t5(dir, exported, expected);
    const auto& ids_t = expected.tensor("ids");
    std::vector<std::int32_t> ids(std::size_t(ids_t.shape[0]));
    expected.read<std::int32_t>("ids", ids, ids_t.shape);
    const auto& logits_t = expected.tensor("logits");
    std::vector<float> want(std::size_t(logits_t.shape[0] * logits_t.shape[1]));
    expected.read<float>("logits", want, logits_t.shape);
    const auto& greedy_t = expected.tensor("greedy");
    std::vector<std::int32_t> want_greedy(std::size_t(greedy_t.shape[0]));
    expected.read<std::int32_t>("greedy", want_greedy, greedy_t.shape);

    Loaded l = load(dir);
    const std::vector<float> got = logits_of(l, ids);
    if (got.size() != want.size()) throw std::runtime_error("logits of " + std::to_string(got.size()) + " values, the reference " + std::to_string(want.size()));
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < got.size(); ++i) diff = std::max(diff, double(std::fabs(got[i] - want[i]))), scale = std::max(scale, double(std::fabs(want[i])));
    const double rel = diff / scale;
    const std::vector<std::int32_t> cont = greedy(l, ids, int(want_greedy.size()));
    std::size_t same = 0;
    while (same < cont.size() && same < want_greedy.size() && cont[same] == want_greedy[same]) ++same;
    std::printf("%s (%s): logits max |diff| %.3g, relative to max |logit| %.3g: %.3g; greedy: %zu of %zu tokens as the reference\n",
                dir.filename().c_str(), l.m.architecture.c_str(), diff, scale, rel, same, want_greedy.size());
    bool ok = rel <= 1e-5 && same == want_greedy.size() && cont.size() == want_greedy.size();

    pretrained::save_hf_model(exported, l.m, l.model->parameters());
    Loaded back = load(exported);
    const std::vector<float> again = logits_of(back, ids);
    const bool identical = again.size() == got.size() && std::equal(again.begin(), again.end(), got.begin(), [](float a, float b) {
                             return std::memcmp(&a, &b, sizeof a) == 0;
                           });
    std::printf("  exported to %s and loaded back: logits %s\n", exported.c_str(), identical ? "bit-identical" : "DIFFER");
    ok = ok && identical;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hf_parity_check: %s\n", e.what());
    return 1;
  }
}
