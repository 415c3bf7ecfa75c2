#include <ctgrad/ops/detail/cpu.hpp>
#include <ctgrad/ops/detail/env_text.hpp>
#include <ctgrad/ops/detail/simd.hpp>
#define CTGRAD_SIMD_ISA isa_scalar
#include <ctgrad/ops/detail/simd_kernels.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ctgrad::simd {

Table table_sse2();
Table table_avx2();
Table table_avx512();

namespace {
struct Tables {
  Table scalar = isa_scalar::make_table<void>("scalar");
  Table sse2, avx2, avx512;
  bool has_avx2 = false, has_avx512 = false;
  const Table* chosen = nullptr;

  Tables() {
    has_avx2 = cpu::features().runs_avx2();
    has_avx512 = cpu::features().runs_avx512();
    sse2 = table_sse2();
    if (has_avx2) avx2 = table_avx2();
    if (has_avx512) avx512 = table_avx512();
    chosen = has_avx512 ? &avx512 : has_avx2 ? &avx2 : &sse2;
    if (const char* want = std::getenv("CTGRAD_SIMD")) {
      if (const Table* t = find(want))
        chosen = t;
      else
      {
        const std::string shown = kernel::env_shown(want);
        const bool known = shown == "scalar" || shown == "sse2" || shown == "avx2" || shown == "avx512";
        std::fprintf(stderr, "ctgrad: warning: CTGRAD_SIMD=%s %s; using %s\n", shown.c_str(),
                     known ? "is not available on this CPU" : "is not one of scalar, sse2, avx2, avx512", chosen->arch);
      }
    }
  }
  const Table* find(const std::string& a) const {
    if (a == "scalar") return &scalar;
    if (a == "sse2") return &sse2;
    if (a == "avx2") return has_avx2 ? &avx2 : nullptr;
    if (a == "avx512") return has_avx512 ? &avx512 : nullptr;
    return nullptr;
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}
}  // namespace

const Table& best() { return *tables().chosen; }
const Table* table(const std::string& arch) { return tables().find(arch); }
std::vector<std::string> available() {
  std::vector<std::string> r = {"scalar", "sse2"};
  if (tables().has_avx2) r.push_back("avx2");
  if (tables().has_avx512) r.push_back("avx512");
  return r;
}

}  // namespace ctgrad::simd
