//===- Isa.cpp - run-time choice of the kernels' instruction set ----------===//
#include "kernels/cpu/Isa.h"

#include <asm/prctl.h>
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace moe::cpu {
namespace {

Isa fromEnvironment() {
  const char *want = std::getenv("MOE_CPU_ISA");
  if (!want || !*want || !std::strcmp(want, "native"))
    return cpuIsa();
  for (Isa level : {Isa::Portable, Isa::Avx2, Isa::Avx512, Isa::Amx})
    if (!std::strcmp(want, isaName(level)))
      return std::min(level, cpuIsa());
  std::fprintf(stderr,
               "warning: MOE_CPU_ISA=%s is not one of baseline, avx2, avx512, amx, native; "
               "using %s\n",
               want, isaName(cpuIsa()));
  return cpuIsa();
}

std::atomic<Isa> &chosen() {
  static std::atomic<Isa> level{fromEnvironment()};
  return level;
}

// AMX-TILE and AMX-INT8 (CPUID 7.0 EDX bits 24, 25), and the kernel's leave
// to use the tile data state (Linux 5.16: arch_prctl asks for it once per
// process; 18 is XFEATURE_XTILEDATA).
bool amxGranted() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
    return false;
  return ::syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, 18) == 0;
}

} // namespace

Isa cpuIsa() {
  static const Isa level = [] {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
        !__builtin_cpu_supports("f16c"))
      return Isa::Portable;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
      return amxGranted() ? Isa::Amx : Isa::Avx512;
    return Isa::Avx2;
  }();
  return level;
}

Isa isa() { return chosen().load(std::memory_order_relaxed); }

void setIsa(Isa level) { chosen().store(std::min(level, cpuIsa()), std::memory_order_relaxed); }

const char *isaName(Isa level) {
  switch (level) {
  case Isa::Portable:
    return "baseline";
  case Isa::Avx2:
    return "avx2";
  case Isa::Avx512:
    return "avx512";
  case Isa::Amx:
    break;
  }
  return "amx";
}

} // namespace moe::cpu
