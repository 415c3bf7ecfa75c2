// Compile-time benchmark: the base Transformer's 6+6 encoder-decoder in one graph.
#include <cstdio>

#include "encoder.hpp"

static constexpr auto G = ctgrad::freeze<bench::encoder_decoder<6>>();
int main() { return bench::run<G>(); }
