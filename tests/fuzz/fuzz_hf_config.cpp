// libFuzzer target: any bytes as a Hugging Face model folder's config.json. Reading must refuse a
// config it cannot map with a format_error naming the field (never crash, hang or accept sizes
// that overflow), and what it accepts must be a model of positive sizes.
#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fuzz_hf_config." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir / "config.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    const auto m = ctgrad::pretrained::read_hf_model(dir);
    const int d = m.is_gpt() ? m.gpt().d_model : m.is_bert() ? m.bert().d_model : m.is_vit() ? m.vit().d_model : m.is_t5() ? m.t5().d_model : m.llama().d_model;
    const int layers = m.is_gpt() ? m.gpt().n_layer : m.is_bert() ? m.bert().n_layer : m.is_vit() ? m.vit().n_layer : m.is_t5() ? m.t5().n_dec_layer : m.llama().n_layer;
    const int heads = m.is_gpt() ? m.gpt().n_head : m.is_bert() ? m.bert().heads : m.is_vit() ? m.vit().heads : m.is_t5() ? m.t5().heads : m.llama().n_head;
    if (m.is_t5() && (m.t5().n_layer <= 0 || m.t5().buckets < 4 || m.t5().buckets % 2 || m.t5().max_distance <= m.t5().buckets / 2 || m.t5().pad < 0 ||
                      m.t5().pad >= m.t5().vocab))
      std::abort();
    if (m.is_vit() && (m.vit().image % m.vit().patch != 0 || (!m.labels.empty() && int(m.labels.size()) != m.vit().classes))) std::abort();
    if (d <= 0 || layers <= 0 || heads <= 0 || d % heads != 0) std::abort();
  } catch (const ctgrad::checkpoint::format_error&) {
  }
  return 0;
}
