// A Hugging Face model folder's tensors: one model.safetensors, or shards through their index; the
// index's faults each refused, naming the folder, the file and the tensor.
#include <catch2/catch.hpp>

#include "../scratch.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ctgrad/checkpoint/tensor_folder.hpp>

using namespace ctgrad;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

fs::path fresh(const std::string& name) {
  const fs::path d = testing::scratch(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

// Two shards: a (F32, 2x2) and b (BF16, 3) in the first, c (F16, 1) in the second.
void write_shards(const fs::path& d) {
  const std::vector<float> a = {1, 2, 3, 4};
  const std::vector<std::uint16_t> b = {0x3F80, 0x4000, 0xC040}, c = {0x3C00};  // bf16 1, 2, -3; f16 1
  std::vector<checkpoint::TensorView> first = {checkpoint::view_of<float>("a", a, {2, 2}),
                                               {"b", checkpoint::DType::BF16, {3}, std::as_bytes(std::span<const std::uint16_t>(b))}};
  std::vector<checkpoint::TensorView> second = {{"c", checkpoint::DType::F16, {1}, std::as_bytes(std::span<const std::uint16_t>(c))}};
  checkpoint::save(d / "model-00001-of-00002.safetensors", first);
  checkpoint::save(d / "model-00002-of-00002.safetensors", second);
}

const char* kIndex = R"({"metadata": {"total_size": 24}, "weight_map": {"a": "model-00001-of-00002.safetensors",
  "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})";

}  // namespace

TEST_CASE("a model folder: one file, or shards through their index, F16 and BF16 as float", "[checkpoint]") {
  const fs::path one = fresh("folder_one");
  const std::vector<float> w = {0.5f, -1};
  std::vector<checkpoint::TensorView> t = {checkpoint::view_of<float>("w", w, {2})};
  checkpoint::save(one / "model.safetensors", t);
  const checkpoint::TensorFolder single(one);
  CHECK(single.names() == std::vector<std::string>{"w"});
  std::vector<float> got(2);
  single.read_float("w", got, std::vector<std::int64_t>{2});
  CHECK(got == w);

  const fs::path d = fresh("folder_sharded");
  write_shards(d);
  write_text(d / "model.safetensors.index.json", kIndex);
  const checkpoint::TensorFolder f(d);
  CHECK(f.names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(f.files().size() == 2);
  std::vector<float> b(3), c(1);
  f.read_float("b", b, std::vector<std::int64_t>{3});
  f.read_float("c", c, std::vector<std::int64_t>{1});
  CHECK(b == std::vector<float>{1, 2, -3});
  CHECK(c == std::vector<float>{1});
  CHECK(f.tensor("a").shape == std::vector<std::int64_t>{2, 2});
  CHECK_THROWS_WITH(f.tensor("zz"), Contains("folder_sharded: no tensor 'zz'"));
}

TEST_CASE("a model folder's faults: no model, a broken index, a shard missing, lying or unlisted", "[checkpoint][errors]") {
  const fs::path empty = fresh("folder_empty");
  CHECK_THROWS_WITH(checkpoint::TensorFolder(empty), Contains("holds neither model.safetensors nor model.safetensors.index.json"));
  CHECK_THROWS_WITH(checkpoint::TensorFolder(empty / "nothing"), Contains("nothing: not a folder"));

  const fs::path d = fresh("folder_faults");
  write_shards(d);
  const fs::path index = d / "model.safetensors.index.json";
  auto refused = [&](const std::string& text, const std::string& why) {
    write_text(index, text);
    CHECK_THROWS_WITH(checkpoint::TensorFolder(d), Contains(why));
  };
  refused("{\"weight_map\": ", "model.safetensors.index.json is not JSON");
  refused("[1, 2]", "has no \"weight_map\" object");
  refused(R"({"weight_map": {}})", "has no \"weight_map\" object");
  refused(R"({"weight_map": {"a": "../model-00001-of-00002.safetensors"}})", "tensor 'a' is mapped to \"../model-00001-of-00002.safetensors\", not the name of a file");
  refused(R"({"weight_map": {"a": 7}})", "tensor 'a' is mapped to 7");
  refused(R"({"weight_map": {"a": "model-00003-of-00003.safetensors"}})", "lists the shard model-00003-of-00003.safetensors, which the folder lacks");
  refused(R"({"weight_map": {"a": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})",
          "maps tensor 'a' to model-00002-of-00002.safetensors, which does not hold it");
  refused(R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})",
          "shard model-00001-of-00002.safetensors holds tensor 'b', which the index does not list");
  // A shard that is not a safetensors file: File's own error, naming it.
  write_text(index, kIndex);
  write_text(d / "model-00002-of-00002.safetensors", "not a checkpoint at all");
  CHECK_THROWS_WITH(checkpoint::TensorFolder(d), Contains("model-00002-of-00002.safetensors"));
}
