// The ctgrad command: the driver (ctgrad.cpp) with the built-in models and the plug-ins beside it.
#include "cli.hpp"

int main(int argc, char** argv) { return ctgrad::cli::main(argc, argv); }
