// What a test may need of the machine beyond what every host has: checks that print why a part
// of a test cannot run here, instead of passing without testing it.
#pragma once
#include <catch2/catch.hpp>
#include <oneapi/tbb/info.h>

#include <string>

#include <ctgrad/ops/detail/gemm.hpp>

namespace ctgrad::testing {

// A test comparing 1 and 2 threads needs two CPUs to run two at once; with one, the 2-thread run
// is a 1-thread run and proves nothing, so the comparison is skipped with a warning.
inline bool two_cpus() {
  if (tbb::info::default_concurrency() >= 2) return true;
  WARN("skipped: this machine gives the process " << tbb::info::default_concurrency()
                                                  << " CPU, so a 2-thread run would be a 1-thread run");
  return false;
}

// bf16 GEMMs need AVX512-BF16 and oneDNN: where either is missing, the bf16 part is skipped with
// the reason (tests of the refusal itself run everywhere).
inline bool bf16_gemm() {
  const std::string why = kernel::set_gemm_precision(kernel::Precision::bf16);
  kernel::set_gemm_precision(kernel::Precision::fp32);
  if (why.empty()) return true;
  WARN("skipped: " << why);
  return false;
}

// Sets the GEMM precision until the end of the scope.
struct ScopedPrecision {
  explicit ScopedPrecision(kernel::Precision p) { REQUIRE(kernel::set_gemm_precision(p).empty()); }
  ~ScopedPrecision() { kernel::set_gemm_precision(kernel::Precision::fp32); }
  ScopedPrecision(const ScopedPrecision&) = delete;
  ScopedPrecision& operator=(const ScopedPrecision&) = delete;
};

// Splits GEMMs for a host of `blocks` CPUs until the end of the scope (kernel::set_gemm_max_blocks).
struct ScopedGemmBlocks {
  explicit ScopedGemmBlocks(int blocks) : old_(kernel::gemm_max_blocks()) { kernel::set_gemm_max_blocks(blocks); }
  ~ScopedGemmBlocks() { kernel::set_gemm_max_blocks(old_); }
  ScopedGemmBlocks(const ScopedGemmBlocks&) = delete;
  ScopedGemmBlocks& operator=(const ScopedGemmBlocks&) = delete;

 private:
  int old_;
};

}  // namespace ctgrad::testing
