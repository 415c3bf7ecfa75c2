// The files of a study that its parts read and write (training/ablation*.cpp): a run's small JSON
// files, its validation curve, the study's own study.json. Internal to the ablation code.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <ctgrad/training/ablation.hpp>

namespace ctgrad::training::ablation::files {

using json = nlohmann::json;

std::string read_text(const std::filesystem::path& p);

// A run's small JSON file (result.json, run.json): at most 1 MiB; `why` says what else it is (the
// parser's own words: NaN, a number past a double's range, a cut file). Discarded when not JSON.
json read_json(const std::filesystem::path& p, std::string* why = nullptr);

// The validation records of a run: step -> metric -> value, and the training time at the last one.
struct Curve {
  std::vector<std::int64_t> steps;
  std::vector<std::map<std::string, double>> values;
  double seconds = 0;
  std::string metric = "loss";  // the first metric the run reports ("val_loss" is its alias)
};
Curve read_curve(const std::filesystem::path& jsonl);

// A run.json's "parameters": a count (a non-negative integer below 2^53), or nullopt.
std::optional<std::int64_t> parameter_count(const json& v);

// Why a finished run's result is not reported: its result.json is not JSON, lacks or mistypes a
// key, is another run's, or its folder was trained again since; empty when it is sound.
std::vector<std::string> result_damage(const RunSpec& r, const std::string& compared_metric);

// What study.json holds: the model, the grid and the fixed settings (a rerun must match them), and
// the seed count (a rerun may raise it).
json study_json(const StudyOptions& o);

}  // namespace ctgrad::training::ablation::files
