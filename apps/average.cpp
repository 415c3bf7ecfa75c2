// ctgrad average-checkpoints <model> --run DIR [--last K] [--out FILE] [--overwrite]
// The paper's checkpoint averaging (Vaswani et al. 2017, section 6.1: the last 5 checkpoints for
// base models): the mean, in double, of every parameter of the last K checkpoints a run kept
// (--set keep_checkpoints=K while training), written as a checkpoint of the run that `eval` and
// the model's commands read with --checkpoint FILE. The optimizer state and metadata are the
// newest checkpoint's; the checkpoints must be of the same model and config. An existing FILE is
// replaced only with --overwrite.
#include <cstdio>
#include <map>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/checkpoint/training.hpp>

#include <ctgrad/training/escape.hpp>

#include "option_text.hpp"
#include "output_file.hpp"
#include "plugins.hpp"
#include "task.hpp"

namespace ctgrad::cli {

int average_checkpoints(const std::vector<std::string>& rest) {
  if (rest.size() < 2 || rest[1].rfind("--", 0) == 0)
    throw config_error("usage: ctgrad average-checkpoints <model> --run DIR [--last K] [--out FILE] [--overwrite]");
  const std::string model = rest[1];
  const Task* task = nullptr;
  for (const Task& t : tasks())
    if (t.name == model) task = &t;
  if (!task && !missing_model_hint(model).empty()) throw config_error(missing_model_hint(model));
  if (!task) throw config_error("unknown model '" + model + "'");
  std::string dir = "runs/" + model, out = "averaged.safetensors";
  std::int64_t last = 5;
  bool overwrite = false;
  for (std::size_t i = 2; i < rest.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= rest.size()) throw config_error(rest[i] + " needs a value");
      return rest[++i];
    };
    const std::string& o = rest[i];
    if (o == "--run") dir = one_line(o, value());
    else if (o == "--overwrite") overwrite = true;
    else if (o == "--last") last = training::parse_integer(value(), "--last", {.min = 1, .max = 1000});
    else if (o == "--out") out = one_line(o, value());
    else throw config_error("unknown option '" + training::printable(o) + "' for ctgrad average-checkpoints (options: --run, --last, --out, --overwrite)");
  }
  if (out.empty() || out[0] == '.' || out.find('/') != std::string::npos || out.size() < 13 || out.substr(out.size() - 12) != ".safetensors" ||
      out == "checkpoint.safetensors" || out.rfind("checkpoint-", 0) == 0)
    throw config_error("--out " + out + ": give a new .safetensors file name of the run folder (not a checkpoint the run writes, nor a hidden name: those are its temporary files)");
  const training::RunFolder folder(dir);
  check_output_file(folder.file(out), "--out", overwrite, folder);
  auto kept = folder.kept_checkpoints();
  for (std::size_t i = 1; i < kept.size(); ++i)  // checkpoint-4 and checkpoint-00000004: one step twice
    if (kept[i].first == kept[i - 1].first)
      throw config_error(dir + " holds two kept checkpoints of step " + std::to_string(kept[i].first) + " (" + kept[i - 1].second.filename().string() + ", " +
                         kept[i].second.filename().string() + "): remove the copy");
  if (kept.empty())
    throw config_error(dir + " holds no kept checkpoints (checkpoint-<step>.safetensors): train with --set keep_checkpoints=" + std::to_string(last));
  if (std::int64_t(kept.size()) < last)
    std::fprintf(stderr, "warning: %s keeps %zu checkpoints, fewer than --last %lld: averaging those\n", dir.c_str(), kept.size(), (long long)last);
  kept.erase(kept.begin(), kept.end() - std::min<std::int64_t>(last, std::int64_t(kept.size())));

  std::vector<checkpoint::File> files;
  for (const auto& [step, path] : kept) {
    files.emplace_back(path);
    checkpoint::check_training_file(files.back());
  }
  const checkpoint::File& newest = files.back();
  const auto meta = [](const checkpoint::File& f, const char* key) {
    const auto it = f.metadata().find(key);
    return it == f.metadata().end() ? std::string() : it->second;
  };
  if (meta(newest, "model") != model)
    throw config_error(newest.path().string() + " is a checkpoint of model '" + meta(newest, "model") + "', not " + model);
  // Of one model and one run: the keys the weights and the run depend on agree (a resume may have
  // changed free keys, such as steps).
  auto config_of = [&](const checkpoint::File& f) {
    Config c = task->schema.defaults();
    c.merge_json(meta(f, "config"), "the config in " + f.path().string());
    return c;
  };
  const Config last_config = config_of(newest);
  for (std::size_t i = 0; i < files.size(); ++i) {
    const checkpoint::File& f = files[i];
    if (meta(f, "model") != model) throw config_error(f.path().string() + " is a checkpoint of model '" + meta(f, "model") + "', not " + model);
    // Its name says its step: a checkpoint of another step copied to the name is not that step's.
    if (meta(f, "optimizer_step") != std::to_string(kept[i].first))
      throw config_error(f.path().string() + " holds the checkpoint of step " + meta(f, "optimizer_step").substr(0, 20) + ", not of step " +
                         std::to_string(kept[i].first) + " its name says: not averaged");
    const auto diff = config_of(f).differences(last_config, training::Role::run);
    if (!diff.empty()) throw config_error(f.path().string() + " is of another run than " + newest.path().string() + " (" + diff.front() + "): not averaged");
  }
  // The parameters averaged; the optimizer's state ("optim.") is the newest's.
  std::vector<std::vector<float>> averaged;
  std::vector<checkpoint::TensorView> tensors;
  for (const std::string& name : newest.names()) {
    const checkpoint::TensorView& t = newest.tensor(name);
    if (name.rfind("optim.", 0) == 0 || t.dtype != checkpoint::DType::F32) {
      tensors.push_back(t);
      continue;
    }
    std::int64_t n = 1;
    for (auto d : t.shape) n *= d;
    std::vector<double> sum(std::size_t(n), 0.0);
    std::vector<float> one(static_cast<std::size_t>(n));
    for (const auto& f : files) {
      if (!f.has(name)) throw config_error(f.path().string() + " lacks the tensor " + name + ": not averaged");
      f.read<float>(name, std::span<float>(one), t.shape);
      for (std::size_t i = 0; i < one.size(); ++i) sum[i] += one[i];
    }
    averaged.emplace_back(std::size_t(n));
    for (std::size_t i = 0; i < sum.size(); ++i) averaged.back()[i] = float(sum[i] / double(files.size()));
    tensors.push_back(checkpoint::view_of<float>(name, std::span<const float>(averaged.back()), t.shape));
  }
  checkpoint::Metadata m = newest.metadata();
  m.erase(checkpoint::kChecksumKey);
  std::string steps;
  for (const auto& [step, path] : kept) steps += (steps.empty() ? "" : ", ") + std::to_string(step);
  m["averaged_steps"] = steps;
  checkpoint::save(folder.file(out), tensors, m);
  std::printf("averaged the parameters of %zu checkpoints (steps %s) of %s into %s\n(read it with: ctgrad eval %s --run %s --checkpoint %s)\n",
              files.size(), steps.c_str(), dir.c_str(), folder.file(out).c_str(), training::shell_quote(model).c_str(), training::shell_quote(dir).c_str(),
              training::shell_quote(out).c_str());
  return 0;
}

}  // namespace ctgrad::cli
