// What a test may need of the machine beyond what every host has: checks that print why a part
// of a test cannot run here, instead of passing without testing it.
#pragma once
#include <catch2/catch.hpp>
#include <oneapi/tbb/info.h>

namespace ctgrad::testing {

// A test comparing 1 and 2 threads needs two CPUs to run two at once; with one, the 2-thread run
// is a 1-thread run and proves nothing, so the comparison is skipped with a warning.
inline bool two_cpus() {
  if (tbb::info::default_concurrency() >= 2) return true;
  WARN("skipped: this machine gives the process " << tbb::info::default_concurrency()
                                                  << " CPU, so a 2-thread run would be a 1-thread run");
  return false;
}

}  // namespace ctgrad::testing
