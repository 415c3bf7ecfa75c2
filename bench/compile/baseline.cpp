// Compile-time benchmark baseline: the same headers, no graph.
#include <cstdio>

#include "encoder.hpp"

int main() { std::puts("no graph"); }
