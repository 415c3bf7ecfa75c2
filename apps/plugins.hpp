// The `ctgrad` command's model plug-ins. The command itself holds the driver, the library and the
// main job (the GPT with each preset's own architecture); every other model task, and the GPT's
// architecture variants for ablations, is a shared module in plugins/ beside the binary, built by
// the full build (one CMake target each: apps/CMakeLists.txt) and loaded at start-up, where its
// tasks and variants register themselves as the built-in ones do. A plug-in is loaded only when
// its stamp (plugins/<name>.so.stamp: the source state it was built from) is the command's, so a
// command rebuilt alone never runs a plug-in compiled against other headers.
#pragma once
#include <string>

namespace ctgrad::cli {

// Loads the plug-ins that match this build (once; a plug-in that fails to load is remembered).
void load_plugins();

// For a model this build does not have: "...: build it with cmake --build build --target X"
// naming the target (and why a plug-in there was not loaded); "" for a name no plug-in provides.
std::string missing_model_hint(const std::string& model);

// For a GPT variant this build does not have: "the other variants are built by cmake ..." (with
// why the variants' plug-in was not loaded), or "" when it is loaded.
std::string missing_variants_hint(const std::string& model);

// "bert, t5, ... (not in this build: cmake --build build builds them)" for the models of the
// plug-ins not built, then each plug-in there that was not loaded with why; "" when all loaded.
std::string models_not_built();

}  // namespace ctgrad::cli
