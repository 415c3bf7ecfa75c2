#include "saved_config.hpp"

#include <ctgrad/checkpoint/training.hpp>

namespace ctgrad::cli {

Config saved_config(const Task& t, const std::filesystem::path& file, std::string* defaulted) {
  const checkpoint::File peek(file);  // reads and validates the whole file
  checkpoint::check_training_file(peek);
  const auto& meta = peek.metadata();
  const auto model = meta.find("model"), config = meta.find("config");
  if (model == meta.end() || config == meta.end())
    throw config_error(file.string() + " was not written by `ctgrad train` (no model or config in its metadata)");
  if (model->second != t.name) throw config_error(file.string() + " is a checkpoint of model '" + model->second + "', not " + t.name);
  Config saved = t.schema.defaults();
  saved.merge_json(config->second, "the config in " + file.string());
  for (const training::Key& k : t.schema.keys()) {
    if (saved.was_set(k.name) || k.stated_when_set) continue;  // (one at its default is not written)
    if (k.role == training::Role::model && !k.added_later)  // what the weights' shapes depend on must be stated
      throw config_error("the config in " + file.string() + " lacks '" + k.name + "': the checkpoint is damaged");
    if (defaulted) *defaulted += (defaulted->empty() ? "" : ", ") + k.name + "=" + saved.show(k.name);
  }
  return saved;
}

}  // namespace ctgrad::cli
