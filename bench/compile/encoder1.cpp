// Compile-time benchmark: a 1-layer encoder (d_model 512, 8 heads, d_ff 2048) in one graph.
#include <cstdio>

#include "encoder.hpp"

static constexpr auto G = ctgrad::freeze<bench::encoder<1>>();
int main() { return bench::run<G>(); }
