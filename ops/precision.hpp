// The precision of float GEMMs, process-wide (as torch's set_float32_matmul_precision): fp32, or
// bf16 operands with fp32 accumulation; double GEMMs stay double. Master weights, optimizer state,
// softmax, norms and losses are fp32 either way: only the GEMMs' inputs are rounded.
#pragma once
#include <string>

namespace ctgrad::kernel {

enum class Precision { fp32, bf16 };

// Returns "" when the precision is in effect, else why not (the CPU lacks AVX512-BF16, oneDNN is
// missing), and GEMMs stay fp32.
std::string set_gemm_precision(Precision p);
Precision gemm_precision();

}  // namespace ctgrad::kernel
