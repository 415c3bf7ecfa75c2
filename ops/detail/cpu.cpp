#include <ctgrad/ops/detail/cpu.hpp>

#include <cpuid.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>
#include <vector>

namespace ctgrad::cpu {
namespace {

Features detect() {
  __builtin_cpu_init();
  Features f;
  f.sse2 = __builtin_cpu_supports("sse2");
  f.sse3 = __builtin_cpu_supports("sse3");
  f.ssse3 = __builtin_cpu_supports("ssse3");
  f.sse4_1 = __builtin_cpu_supports("sse4.1");
  f.sse4_2 = __builtin_cpu_supports("sse4.2");
  f.sse4a = __builtin_cpu_supports("sse4a");
  f.avx = __builtin_cpu_supports("avx");
  f.fma = __builtin_cpu_supports("fma");
  f.fma4 = __builtin_cpu_supports("fma4");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512cd = __builtin_cpu_supports("avx512cd");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  f.amx = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16");
  return f;
}

// Each flag with its name, lowest first.
std::vector<std::pair<const char*, bool Features::*>> flag_list() {
  return {{"sse2", &Features::sse2},         {"sse3", &Features::sse3},         {"ssse3", &Features::ssse3},
          {"sse4.1", &Features::sse4_1},     {"sse4.2", &Features::sse4_2},     {"sse4a", &Features::sse4a},
          {"avx", &Features::avx},           {"fma", &Features::fma},           {"fma4", &Features::fma4},
          {"avx2", &Features::avx2},         {"avx512f", &Features::avx512f},   {"avx512cd", &Features::avx512cd},
          {"avx512dq", &Features::avx512dq}, {"avx512bw", &Features::avx512bw}, {"avx512vl", &Features::avx512vl},
          {"avx512bf16", &Features::avx512bf16}, {"amx", &Features::amx}};
}

}  // namespace

std::string Features::flags() const {
  std::string s;
  for (const auto& [name, member] : flag_list())
    if (this->*member) {
      if (!s.empty()) s += ' ';
      s += name;
    }
  return s;
}

const Features& features() {
  static const Features f = detect();
  return f;
}

std::string model_name() {
  unsigned r[12]{};
  if (__get_cpuid_max(0x80000000, nullptr) < 0x80000004) return "unknown x86-64 CPU";
  for (unsigned i = 0; i < 3; ++i) __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
  char name[49]{};
  std::memcpy(name, r, 48);
  std::string s(name);
  s.erase(0, s.find_first_not_of(' '));
  s.erase(s.find_last_not_of(" \0") + 1);
  return s.empty() ? "unknown x86-64 CPU" : s;
}

std::string describe() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  __get_cpuid(1, &a, &b, &c, &d);
  unsigned family = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
  if (family == 0xf) family += (a >> 20) & 0xff;
  if (family == 0x6 || family >= 0xf) model += ((a >> 16) & 0xf) << 4;
  return model_name() + " (family " + std::to_string(family) + ", model " + std::to_string(model) + "; " +
         features().flags() + ")";
}

std::string openblas_core_lacks(std::string_view core, const Features& f) {
  // OpenBLAS 0.3.21's DYNAMIC_ARCH cores and the instructions their kernels use (32-bit-era
  // cores run as Prescott on x86-64). Later releases add cores; an unknown name is reported.
  using F = bool Features::*;
  struct Core {
    const char* name;
    std::vector<std::pair<const char*, F>> needs;
  };
  static const std::vector<Core> cores = {
      {"katmai", {{"sse3", &Features::sse3}}},       {"coppermine", {{"sse3", &Features::sse3}}},
      {"northwood", {{"sse3", &Features::sse3}}},    {"banias", {{"sse3", &Features::sse3}}},
      {"athlon", {{"sse3", &Features::sse3}}},       {"prescott", {{"sse3", &Features::sse3}}},
      {"opteron", {{"sse2", &Features::sse2}}},      {"opteron_sse3", {{"sse3", &Features::sse3}}},
      {"core2", {{"ssse3", &Features::ssse3}}},      {"atom", {{"ssse3", &Features::ssse3}}},
      {"nano", {{"ssse3", &Features::ssse3}}},       {"penryn", {{"sse4.1", &Features::sse4_1}}},
      {"dunnington", {{"sse4.1", &Features::sse4_1}}}, {"nehalem", {{"sse4.2", &Features::sse4_2}}},
      {"barcelona", {{"sse3", &Features::sse3}, {"sse4a", &Features::sse4a}}},
      {"bobcat", {{"ssse3", &Features::ssse3}, {"sse4a", &Features::sse4a}}},
      {"sandybridge", {{"avx", &Features::avx}}},
      {"bulldozer", {{"avx", &Features::avx}, {"fma4", &Features::fma4}}},
      {"piledriver", {{"avx", &Features::avx}, {"fma", &Features::fma}}},
      {"steamroller", {{"avx", &Features::avx}, {"fma", &Features::fma}}},
      {"excavator", {{"avx2", &Features::avx2}, {"fma", &Features::fma}}},
      {"haswell", {{"avx2", &Features::avx2}, {"fma", &Features::fma}}},
      {"zen", {{"avx2", &Features::avx2}, {"fma", &Features::fma}}},
      {"skylakex",
       {{"avx2", &Features::avx2}, {"fma", &Features::fma}, {"avx512f", &Features::avx512f}, {"avx512cd", &Features::avx512cd},
        {"avx512dq", &Features::avx512dq}, {"avx512bw", &Features::avx512bw}, {"avx512vl", &Features::avx512vl}}},
      // These two add BF16 and AMX kernels for sbgemm only; sgemm and dgemm (all ctgrad calls) are
      // SkylakeX's. Requiring BF16 or AMX here would refuse OpenBLAS on a Sapphire Rapids guest
      // whose OS has not enabled AMX.
      {"cooperlake",
       {{"avx2", &Features::avx2}, {"fma", &Features::fma}, {"avx512f", &Features::avx512f}, {"avx512cd", &Features::avx512cd},
        {"avx512dq", &Features::avx512dq}, {"avx512bw", &Features::avx512bw}, {"avx512vl", &Features::avx512vl}}},
      {"sapphirerapids",
       {{"avx2", &Features::avx2}, {"fma", &Features::fma}, {"avx512f", &Features::avx512f}, {"avx512cd", &Features::avx512cd},
        {"avx512dq", &Features::avx512dq}, {"avx512bw", &Features::avx512bw}, {"avx512vl", &Features::avx512vl}}},

  };
  std::string lower(core);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  for (const Core& c : cores) {
    if (lower != c.name) continue;
    std::string missing;
    for (const auto& [name, member] : c.needs)
      if (!(f.*member)) {
        if (!missing.empty()) missing += ", ";
        missing += name;
      }
    return missing;
  }
  return "unknown core";
}

std::string_view best_openblas_core(const Features& f) {
  if (openblas_core_lacks("SkylakeX", f).empty()) return "SkylakeX";
  if (openblas_core_lacks("Haswell", f).empty()) return "Haswell";
  return "";
}

}  // namespace ctgrad::cpu
