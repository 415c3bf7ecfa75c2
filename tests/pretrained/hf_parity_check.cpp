// Loads a Hugging Face model folder written by bench/reference/hf_models.py and compares ctgrad's
// logits and greedy continuation (decoded with the key/value cache) with the reference's
// expected.safetensors; then exports the loaded model (save_hf_model), loads the export and
// requires bit-identical logits. Prints the figures; exit 1 on a mismatch.
//   hf_parity_check FOLDER EXPORT_FOLDER
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/models/gpt.hpp>
#include <ctgrad/models/llama.hpp>
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
  l.model = std::make_unique<Program<run_time>>(freeze(l.m.is_gpt() ? models::gpt(l.m.gpt()) : models::llama(l.m.llama())), opts);
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: hf_parity_check FOLDER EXPORT_FOLDER\n");
    return 2;
  }
  try {
    const fs::path dir = argv[1], exported = argv[2];
    const checkpoint::File expected(dir / "expected.safetensors");
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
