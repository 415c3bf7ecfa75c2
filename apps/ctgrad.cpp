// The ctgrad command:
//   ctgrad train <model> [--config file.json] [--set key=value ...] [--run DIR] [--resume] [--threads N]
//   ctgrad eval <model> [--run DIR] [--set key=value ...] [--threads N] [--attention-png DIR] [--sentence TEXT]
//   ctgrad sample gpt [--run DIR] [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P]
//                     [--seed S] [--end TEXT] [--slide]
// Models: gpt (decoder-only LM on the KJV Bible, docs/models/gpt.md), transformer (encoder-decoder:
// the copy task and EN->DE translation, docs/models/transformer.md), vit (Fashion-MNIST, docs/models/vit.md).
#include <cstdio>
#include <fstream>

#include "cli.hpp"

using namespace ctgrad::cli;

namespace {

Args parse(int argc, char** argv) {
  if (argc < 3) throw usage_error("usage: ctgrad train|eval|sample <model> [options] (models: gpt, transformer, vit)");
  Args a;
  a.command = argv[1], a.model = argv[2];
  if (a.command != "train" && a.command != "eval" && a.command != "sample") throw usage_error("unknown command '" + a.command + "'");
  if (a.model != "gpt" && a.model != "transformer" && a.model != "vit")
    throw usage_error("unknown model '" + a.model + "' (models: gpt, transformer, vit)");
  a.run_dir = "runs/" + a.model;
  for (int i = 3; i < argc; ++i) {
    const std::string o = argv[i];
    try {
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw usage_error(o + " needs a value");
        return argv[++i];
      };
      if (o == "--config") a.config_file = value();
      else if (o == "--set") a.sets.push_back(value());
      else if (o == "--run") a.run_dir = value();
      else if (o == "--resume") a.resume = true;
      else if (o == "--threads") a.threads = std::stoi(value());
      else if (o == "--prompt") a.prompt = value();
      else if (o == "--tokens") a.tokens = std::stoi(value());
      else if (o == "--temperature") a.temperature = std::stod(value());
      else if (o == "--top-k") a.top_k = std::stoi(value());
      else if (o == "--top-p") a.top_p = std::stod(value());
      else if (o == "--end") a.end = value();
      else if (o == "--slide") a.slide = true;
      else if (o == "--seed") a.seed = std::stoull(value());
      else if (o == "--attention-png") a.attention_png = value();
      else if (o == "--sentence") a.sentence = value();
      else throw usage_error("unknown option '" + o + "'");
    } catch (const std::logic_error&) {  // std::stoi and friends
      throw usage_error("option " + o + " expects a number, got '" + argv[i] + "'");
    }
  }
  if (!a.config_file.empty()) {
    std::ifstream in(a.config_file);
    if (!in) throw usage_error("cannot open config file " + a.config_file);
    json file;
    try {
      in >> file;
    } catch (const std::exception& e) {
      throw usage_error("config file " + a.config_file + " is not valid JSON: " + e.what());
    }
    // Before the --set values, which win; eval and sample apply both over the checkpoint's config.
    std::vector<std::string> from_file;
    for (auto it = file.begin(); it != file.end(); ++it) from_file.push_back(it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump()));
    a.sets.insert(a.sets.begin(), from_file.begin(), from_file.end());
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    return a.model == "gpt" ? gpt_command(a) : a.model == "transformer" ? transformer_command(a) : vit_command(a);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "ctgrad: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
