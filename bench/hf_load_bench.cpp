// Loading a 125M-parameter Hugging Face folder (GPT-2 small's shapes: 12 layers, d 768, vocab
// 50257, context 1024; random weights) into a ctgrad program: seconds, and the memory the load
// adds beyond the parameters (peak RSS, reset before the load through /proc/self/clear_refs).
// Two folders: as transformers writes one (F32, no checksum) and as `ctgrad export` does (its
// checksum verified by streaming the file once more). Files are in the page cache (written just
// before): the figure is the reader's cost, not the disk's.
//   ctgrad-hf-load-bench [WORK_DIR]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/models/gpt.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

namespace {
using namespace ctgrad;
namespace fs = std::filesystem;

double status_mb(const char* field) {  // VmRSS or VmHWM of /proc/self/status, in MB
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::strlen(field) + 1)) / 1024.0;
  return 0;
}
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

// The folder as transformers writes it: the same tensors, no ctgrad checksum.
void strip_checksum(const fs::path& file) {
  const checkpoint::File f(file);
  std::vector<checkpoint::TensorView> views;
  for (const std::string& n : f.names()) views.push_back(f.tensor(n));
  nlohmann::ordered_json h;
  std::uint64_t at = 0;
  for (const auto& v : views) {
    h[v.name] = {{"dtype", "F32"}, {"shape", v.shape}, {"data_offsets", {at, at + v.data.size()}}};
    at += v.data.size();
  }
  h["__metadata__"] = {{"format", "pt"}};
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const fs::path tmp = file.string() + ".plain";
  {
    std::ofstream out(tmp, std::ios::binary);
    const std::uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << text;
    for (const auto& v : views) out.write(reinterpret_cast<const char*>(v.data.data()), std::streamsize(v.data.size()));
  }
  fs::rename(tmp, file);
}
}  // namespace

int main(int argc, char** argv) {
  const fs::path work = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "ctgrad-hf-load-bench";
  const models::GptConfig c{.vocab = 50257, .n_layer = 12, .n_head = 12, .d_model = 768, .context = 1024};
  const pretrained::HfModel m = pretrained::hf_model_of(c, {{"norm_eps", 1e-5}, {"dropout", 0.1}});
  {
    Program<run_time> source(freeze(models::gpt(c)), Options{.seed = 1});
    pretrained::save_hf_model(work / "export", m, source.parameters());
    pretrained::save_hf_model(work / "transformers", m, source.parameters());
  }
  strip_checksum(work / "transformers" / "model.safetensors");
  Program<run_time> model(freeze(models::gpt(c)));
  const double params_mb = 4.0 * double(model.parameter_count()) / (1 << 20);
  std::printf("GPT-2 small shapes: %lld parameters, %.0f MB as F32\n", (long long)model.parameter_count(), params_mb);
  for (const char* kind : {"transformers", "export"}) {
    const fs::path dir = work / kind;
    const double before = status_mb("VmRSS:");
    reset_peak();
    const auto t0 = std::chrono::steady_clock::now();
    pretrained::load_hf_weights(dir, pretrained::read_hf_model(dir), model.parameters());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-12s folder (%s): loaded in %.2f s (%.0f MB/s); peak RSS %.0f MB over the %.0f MB before the load (%.1f MB above it)\n", kind,
                std::string(kind) == "export" ? "checksum streamed" : "F32, no checksum", s, params_mb / s, status_mb("VmHWM:"), before,
                status_mb("VmHWM:") - before);
  }
  fs::remove_all(work);
  return 0;
}
