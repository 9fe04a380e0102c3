//===- Isa.h - which instruction set the CPU kernels use --------*- C++ -*-===//
//
// The kernels are built for baseline x86-64 and carry AVX2 and AVX-512
// variants of their hot loops, picked here at run time. Every variant of a
// kernel computes the same sequence of operations per output element, so a
// plan gives the same bits on an AVX2 and an AVX-512 machine; only the
// portable build (for CPUs without AVX2+FMA) rounds differently, except
// over panel weights (Kernels.h), where it gives the same bits too.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_ISA_H
#define MOE_KERNELS_CPU_ISA_H

namespace moe::cpu {

/// Ordered: each level includes the ones before it.
enum class Isa {
  Portable, ///< any x86-64
  Avx2,     ///< AVX2 + FMA + F16C
  Avx512,   ///< and AVX-512 F/BW/DQ/VL
  Amx,      ///< and AMX-TILE + AMX-INT8, granted by the kernel (W8A8 only)
};

/// The best level this CPU runs.
Isa cpuIsa();

/// The level the kernels use: cpuIsa(), capped by the environment variable
/// MOE_CPU_ISA (baseline, avx2, avx512, amx or native; another value is
/// reported on stderr once and ignored).
Isa isa();

/// Tests and benchmarks: use min(level, cpuIsa()) from now on (not while
/// kernels run on other threads).
void setIsa(Isa level);

/// "baseline", "avx2", "avx512" or "amx".
const char *isaName(Isa level);

/// Whether the AVX2 builds run (isa() >= Isa::Avx2).
inline bool useAvx2() { return isa() >= Isa::Avx2; }

/// The target of a function built for the avx512 level (what the level
/// guarantees, AVX2 included).
#define MOE_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))

} // namespace moe::cpu

#endif
