// Compile-time benchmark: a 12-layer encoder (d_model 512, 8 heads, d_ff 2048) in one graph.
#include <cstdio>

#include "encoder.hpp"

static constexpr auto G = ctgrad::freeze<bench::encoder<12>>();
int main() { return bench::run<G>(); }
