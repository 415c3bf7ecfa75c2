// Hugging Face model folders: what ctgrad exports loads back; each fault of a hostile folder (a
// config field ctgrad does not read, sizes disagreeing with the tensors, a missing, extra or
// misshapen tensor, a truncated or lying safetensors file, one truncated while it is read) is a
// one-line format_error naming what was wrong.
#include <catch2/catch.hpp>

#include "../scratch.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/checkpoint/tensor_folder.hpp>
#include <ctgrad/models/gpt.hpp>
#include <ctgrad/models/llama.hpp>
#include <ctgrad/models/vit.hpp>
#include <ctgrad/pretrained/hf_model.hpp>

using namespace ctgrad;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr models::LlamaConfig kTiny{.vocab = 32, .n_layer = 1, .n_head = 2, .kv_heads = 1, .d_model = 16, .context = 16, .d_ff = 24};

fs::path fresh(const std::string& name) {
  const fs::path d = testing::scratch(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

json read_json(const fs::path& p) { return json::parse(std::ifstream(p)); }
void write_json(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(2); }

// A tiny Llama exported (config.json, model.safetensors), and its program.
std::unique_ptr<Program<run_time>> exported_llama(const fs::path& dir, const models::LlamaConfig& c = kTiny) {
  auto p = std::make_unique<Program<run_time>>(freeze(models::llama(c)), Options{.seed = 3});
  pretrained::save_hf_model(dir, pretrained::hf_model_of(c, {{"norm_eps", 1e-5}}), p->parameters());
  return p;
}

// A safetensors file written byte by byte (no ctgrad checksum: read on demand, as Hugging Face's).
void write_plain_safetensors(const fs::path& p, const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& tensors) {
  json h;
  std::uint64_t at = 0;
  for (const auto& [name, shape] : tensors) {
    std::uint64_t n = 1;
    for (auto d : shape) n *= std::uint64_t(d);
    h[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {at, at + 4 * n}}};
    at += 4 * n;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream f(p, std::ios::binary);
  const std::uint64_t len = text.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f << text;
  const std::vector<float> data(at / 4, 0.25f);
  f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(at));
}

std::string load_error(const fs::path& dir) {
  try {
    const pretrained::HfModel m = pretrained::read_hf_model(dir);
    Program<run_time> p(freeze(m.is_gpt() ? models::gpt(m.gpt()) : models::llama(m.llama())));
    pretrained::load_hf_weights(dir, m, p.parameters());
  } catch (const checkpoint::format_error& e) {
    const std::string s = e.what();
    CHECK(s.find('\n') == std::string::npos);  // one line
    return s;
  }
  return "";
}

}  // namespace

TEST_CASE("an exported Llama loads back to the same parameters", "[pretrained]") {
  const fs::path d = fresh("hf_roundtrip");
  const auto original = exported_llama(d);
  const pretrained::HfModel m = pretrained::read_hf_model(d);
  CHECK(m.architecture == "LlamaForCausalLM");
  CHECK(m.hyper("norm_eps", 0) == 1e-5);
  Program<run_time> back(freeze(models::llama(m.llama())), Options{.seed = 9});
  pretrained::load_hf_weights(d, m, back.parameters());
  REQUIRE(back.parameters().size() == original->parameters().size());
  for (std::size_t i = 0; i < back.parameters().size(); ++i) {
    const auto a = original->parameters()[i].value.span(), b = back.parameters()[i].value.span();
    CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
  }
}

TEST_CASE("a classifier of other classes loads a folder's body under a new head, and its class names round-trip", "[pretrained]") {
  const fs::path d = fresh("hf_new_head");
  const models::VitConfig four{.image = 8, .channels = 1, .patch = 4, .d_model = 8, .n_layer = 1, .heads = 2, .d_mlp = 16, .classes = 4};
  Program<run_time> pretrained_vit(freeze(models::vit(four)), Options{.seed = 3});
  pretrained::HfModel out = pretrained::hf_model_of(four, {{"norm_eps", 1e-5}});
  out.labels = {"cat", "dog", "\"quoted\"", "x\ny"};
  pretrained::save_hf_model(d, out, pretrained_vit.parameters());
  const pretrained::HfModel m = pretrained::read_hf_model(d);
  CHECK(m.labels == out.labels);

  models::VitConfig three = four;
  three.classes = 3;
  Program<run_time> tuned(freeze(models::vit(three)), Options{.seed = 9});
  const std::vector<float> head_before(tuned.parameter("head.weight").value.span().begin(), tuned.parameter("head.weight").value.span().end());
  CHECK_THROWS_WITH(pretrained::load_hf_weights(d, m, tuned.parameters()), Contains("tensor 'classifier.weight' has shape [4, 8]"));
  const auto head = [](std::string_view n) { return n.rfind("head.", 0) == 0; };
  const pretrained::LoadReport r = pretrained::load_hf_weights(d, m, tuned.parameters(), head);
  CHECK(r.fresh == std::vector<std::string>{"head.weight", "head.bias"});
  CHECK(r.unused == 2);
  CHECK(r.loaded == int(tuned.parameters().size()) - 2);
  const auto now = tuned.parameter("head.weight").value.span();
  CHECK(std::equal(now.begin(), now.end(), head_before.begin()));  // as initialised
  const auto a = pretrained_vit.parameter("pos").value.span(), b = tuned.parameter("pos").value.span();
  CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
  // The same classes: every tensor read, the head too.
  Program<run_time> same(freeze(models::vit(four)), Options{.seed = 9});
  CHECK(pretrained::load_hf_weights(d, m, same.parameters(), head).fresh.empty());
  const auto want = pretrained_vit.parameter("head.weight").value.span(), got = same.parameter("head.weight").value.span();
  CHECK(std::memcmp(want.data(), got.data(), want.size_bytes()) == 0);
  // A head excuses only the folder's own head: a layer the config has no place for is still refused.
  models::VitConfig shallow = three;
  shallow.n_layer = 0;
  Program<run_time> short_model(freeze(models::vit(shallow)), Options{.seed = 9});
  CHECK_THROWS_WITH(pretrained::load_hf_weights(d, m, short_model.parameters(), head), Contains("vit.encoder.layer.0."));
}

TEST_CASE("config.json fields ctgrad does not compute are refused by name", "[pretrained]") {
  const fs::path d = fresh("hf_config_faults");
  exported_llama(d);
  const json good = read_json(d / "config.json");
  auto with = [&](auto edit) {
    json j = good;
    edit(j);
    write_json(d / "config.json", j);
    return load_error(d);
  };
  CHECK_THAT(with([](json& j) { j["rope_interleave_mode"] = 2; }), Contains("'rope_interleave_mode'") && Contains("refused rather than ignored"));
  CHECK_THAT(with([](json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; }), Contains("rope_type 'yarn' is not supported"));
  CHECK_THAT(with([](json& j) { j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"beta", 1}}; }), Contains("'beta'"));
  CHECK_THAT(with([](json& j) { j["head_dim"] = 4; }), Contains("head_dim 4 differs"));
  CHECK_THAT(with([](json& j) { j["hidden_act"] = "gelu"; }), Contains("'hidden_act'") && Contains("silu"));
  CHECK_THAT(with([](json& j) { j["architectures"] = {"LlamaForSequenceClassification"}; }), Contains("LlamaForSequenceClassification"));
  CHECK_THAT(with([](json& j) { j["model_type"] = "falcon"; }), Contains("model_type 'falcon'"));
  CHECK_THAT(with([](json& j) { j["quantization_config"] = {{"bits", 4}}; }), Contains("quantization_config"));
  CHECK_THAT(with([](json& j) { j["num_hidden_layers"] = "two"; }), Contains("'num_hidden_layers' is \"two\", not an integer"));
  CHECK_THAT(with([](json& j) { j.erase("hidden_size"); }), Contains("'hidden_size' is missing"));
  CHECK_THAT(with([](json& j) { j["attention_bias"] = true; }), Contains("attention_bias true with mlp_bias false"));
  // Sizes that disagree with the tensors: the tensor and both shapes named.
  CHECK_THAT(with([](json& j) { j["intermediate_size"] = 32; }), Contains("tensor 'model.layers.0.mlp.gate_proj.weight' has shape [24, 16], config.json makes it [32, 16]"));
  CHECK_THAT(with([](json& j) { j["num_hidden_layers"] = 2; }), Contains("lacks tensor 'model.layers.1."));
  CHECK(with([](json& j) { j["tie_word_embeddings"] = true; }).empty());  // a stored head of a tied model is ignored, as Hugging Face does
  std::ofstream(d / "config.json") << "{\"model_type\": ";
  CHECK_THAT(load_error(d), Contains("config.json: not JSON"));
}

TEST_CASE("a GPT-2 config with dropouts ctgrad cannot express is refused", "[pretrained]") {
  const fs::path d = fresh("hf_gpt2_config");
  models::GptConfig c{.vocab = 32, .n_layer = 1, .n_head = 2, .d_model = 16, .context = 16};
  Program<run_time> p(freeze(models::gpt(c)));
  pretrained::save_hf_model(d, pretrained::hf_model_of(c, {{"dropout", 0.1}}), p.parameters());
  CHECK(load_error(d).empty());
  json j = read_json(d / "config.json");
  j["attn_pdrop"] = 0.0;
  write_json(d / "config.json", j);
  CHECK_THAT(load_error(d), Contains("resid_pdrop, embd_pdrop and attn_pdrop differ"));
  CHECK_THROWS_WITH(pretrained::hf_model_of(models::GptConfig{.bias = false}, {}), Contains("without biases"));
  CHECK_THROWS_WITH(pretrained::hf_model_of(models::LlamaConfig{.moe_experts = 4}, {}), Contains("mixture of experts"));
}

TEST_CASE("a hostile model folder's tensors: missing, extra, misshapen, truncated, lying", "[pretrained]") {
  const fs::path d = fresh("hf_tensor_faults");
  exported_llama(d);
  const pretrained::HfModel m = pretrained::read_hf_model(d);
  Program<run_time> p(freeze(models::llama(m.llama())));
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors;
  for (const auto& q : p.parameters()) tensors.emplace_back(std::string(q.name), std::vector<std::int64_t>(q.value.shape().begin(), q.value.shape().end()));
  const fs::path file = d / "model.safetensors";
  write_plain_safetensors(file, tensors);
  CHECK(load_error(d).empty());

  auto without = tensors;
  without.pop_back();
  write_plain_safetensors(file, without);
  CHECK_THAT(load_error(d), Contains("lacks tensor '" + tensors.back().first + "'"));

  auto extra = tensors;
  extra.push_back({"model.layers.0.self_attn.extra.weight", {2}});
  write_plain_safetensors(file, extra);
  CHECK_THAT(load_error(d), Contains("holds tensor 'model.layers.0.self_attn.extra.weight', which LlamaForCausalLM"));

  auto misshapen = tensors;
  misshapen[0].second = {misshapen[0].second.back(), misshapen[0].second.front()};
  write_plain_safetensors(file, misshapen);
  CHECK_THAT(load_error(d), Contains("tensor '" + tensors[0].first + "' has shape"));

  // Truncated: the header's offsets run past the end.
  write_plain_safetensors(file, tensors);
  fs::resize_file(file, fs::file_size(file) - 8);
  CHECK_THAT(load_error(d), Contains("data_offsets out of the file's"));
  // A header length lying past the file.
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    const std::uint64_t lie = std::uint64_t(1) << 40;
    f.write(reinterpret_cast<const char*>(&lie), 8);
  }
  CHECK_THAT(load_error(d), Contains("runs past the end of the file"));

  // Truncated by another process after the folder was opened: a named error, not a fault.
  write_plain_safetensors(file, tensors);
  const checkpoint::TensorFolder folder(d);
  fs::resize_file(file, 64);
  std::vector<float> out(std::size_t(p.parameters().back().value.numel));
  CHECK_THROWS_WITH(folder.read_float(tensors.back().first, out, tensors.back().second), Contains("the file ended before its data"));
}
