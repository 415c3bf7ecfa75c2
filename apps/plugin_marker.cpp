// Compiled into every plug-in: the source state it was built from, which the command compares
// with its own after loading it (apps/plugins.cpp), so that a file that only looks like a plug-in
// (another library, a plug-in of another checkout beside a copied stamp) is not used.
#include "git_commit.h"

extern "C" __attribute__((visibility("default"))) const char ctgrad_plugin_commit[] = CTGRAD_GIT_COMMIT;
