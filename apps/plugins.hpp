// The `ctgrad` command's model plug-ins. The command itself holds the driver, the library and the
// main job (the GPT with each preset's own architecture); every other model task, and the GPT's
// architecture variants for ablations, is a shared module in plugins/ beside the binary, built by
// the full build (one CMake target each: apps/CMakeLists.txt) and loaded at start-up, where its
// tasks and variants register themselves as the built-in ones do. A plug-in is loaded only when
// its ELF headers lie within the file and its stamp (plugins/<name>.so.stamp: the source state it
// was built from and the XXH3-128 of its bytes, apps/plugin_stamp.cpp) is the command's state and
// the file's hash, so that a command rebuilt alone never runs a plug-in compiled against other
// headers, and a damaged one never crashes the command; after loading, its marker
// (apps/plugin_marker.cpp) and the models it registered are checked too.
#pragma once
#include <string>

namespace ctgrad::cli {

// Loads the plug-ins that match this build (once; a plug-in that fails to load is remembered).
void load_plugins();

// The plug-in being loaded (1, 2, ...; 0: the command's own start-up), for a registry to note who
// registered an entry; and whether that plug-in was rejected after it loaded, so that what it
// registered is not used (its code stays mapped, its entries are skipped).
int loading_plugin();
bool plugin_rejected(int plugin);

// For a model this build does not have: "...: build it with cmake --build build --target X"
// naming the target (and why a plug-in there was not loaded); "" for a name no plug-in provides.
std::string missing_model_hint(const std::string& model);

// "bert, t5, ... (not in this build: cmake --build build builds them)" for the models of the
// plug-ins not built, then each plug-in there that was not loaded with why; "" when all loaded.
std::string models_not_built();

}  // namespace ctgrad::cli
