// The config a checkpoint of `ctgrad train` states: read by train --resume, eval and the extra
// commands, and by `ablate` to know whether a run folder's checkpoint is the study's run.
#pragma once

#include <filesystem>
#include <string>

#include "task.hpp"

namespace ctgrad::cli {

// Reads and validates the whole file: a checkpoint of model `t` whose config states every key the
// weights' shapes depend on (config_error otherwise). `defaulted` receives "key=value, ..." for
// the keys it does not state (written by an older version, or edited): those take their defaults.
Config saved_config(const Task& t, const std::filesystem::path& checkpoint, std::string* defaulted = nullptr);

}  // namespace ctgrad::cli
