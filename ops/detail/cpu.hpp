// What this CPU lets a program execute, read once. Every run-time instruction-set choice in ctgrad
// (the SIMD tables, the OpenBLAS kernels) asks here, so that one build runs on any x86-64 machine
// and never executes an instruction the CPU or the OS lacks.
//
// The flags come from GCC's __builtin_cpu_supports, which checks the OS's saved register state
// (XCR0) as well as CPUID: an AVX-512 CPU whose kernel does not save the zmm registers reads as
// "no AVX-512". (xsimd 8's detection does neither, and reads AVX from the wrong CPUID leaf.)
#pragma once
#include <string>
#include <string_view>

namespace ctgrad::cpu {

struct Features {
  bool sse2 = false, sse3 = false, ssse3 = false, sse4_1 = false, sse4_2 = false, sse4a = false;
  bool avx = false, fma = false, fma4 = false, avx2 = false;
  bool avx512f = false, avx512cd = false, avx512dq = false, avx512bw = false, avx512vl = false, avx512bf16 = false;
  bool amx = false;  // amx-tile and amx-bf16

  // The sets ctgrad's kernels are compiled for (ops/detail/simd_*.cpp).
  bool runs_avx2() const { return avx && avx2 && fma; }
  bool runs_avx512() const { return runs_avx2() && avx512f && avx512cd && avx512dq && avx512bw && avx512vl; }
  // "sse2 sse3 ... avx512bf16": the flags that are set, lowest first.
  std::string flags() const;
};

const Features& features();  // this CPU, read once

// "AMD EPYC (family 26, model 2; sse2 ... avx512bf16)": what a benchmark prints beside its figures.
std::string describe();
std::string model_name();  // the CPUID brand string, e.g. "AMD EPYC 9B45"

// What an OpenBLAS DYNAMIC_ARCH core ("Haswell", "SkylakeX", ... as openblas_get_corename() and
// OPENBLAS_CORETYPE spell them, any case) executes. Empty when `f` runs it; otherwise the missing
// instructions ("avx2, fma"), or "unknown core" for a name not in the table.
std::string openblas_core_lacks(std::string_view core, const Features& f);

// The OpenBLAS core whose sgemm/dgemm are the fastest `f` runs, by instruction set rather than by
// CPU model (an OpenBLAS release does not know the CPUs made after it): "SkylakeX" (AVX-512, the
// kernels of every AVX-512 core), "Haswell" (AVX2 + FMA), or "" (OpenBLAS's own detection).
std::string_view best_openblas_core(const Features& f);

}  // namespace ctgrad::cpu
