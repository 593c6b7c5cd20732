#include "model/kernels/cpu_isa.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.h"

namespace dspark::kernels {
namespace {

constexpr Isa kAllIsas[] = {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx};

struct CpuidRegs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(uint32_t leaf, uint32_t subleaf) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return CpuidRegs{};
  return r;
}

bool bit(uint32_t value, int index) { return (value >> index) & 1u; }

// XCR0 says which register state the OS saves on a context switch. Without it the CPU may
// advertise AVX-512 yet the OS would corrupt zmm registers, so cpuid alone is not enough.
// Inline asm because _xgetbv needs -mxsave, which this generic file must not be compiled with.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

// Linux hands out the AMX tile data state (8 KB per thread) only on request, per process
// (arch/x86/include/uapi/asm/prctl.h; kernels since 5.16): asked once, it holds for every thread.
constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool tile_state_granted() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  uint64_t permitted = 0;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &permitted) == 0 && ((permitted >> kXfeatureXtiledata) & 1u);
}

bool detect_amx() {
  const bool osxsave = bit(cpuid(1, 0).ecx, 27);
  if (!osxsave) return false;
  const CpuidRegs leaf7 = cpuid(7, 0);
  const bool os_saves_tiles = (read_xcr0() & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA
  return os_saves_tiles && bit(leaf7.edx, 24) /*tile*/ && bit(leaf7.edx, 25) /*int8*/ &&
         bit(leaf7.edx, 22) /*bf16*/ && bit(leaf7.ecx, 11) /*avx512_vnni*/;
}

Isa detect_best_isa() {
  const CpuidRegs leaf1 = cpuid(1, 0);
  const bool osxsave = bit(leaf1.ecx, 27);
  if (!osxsave) return Isa::kGeneric;
  const uint64_t xcr0 = read_xcr0();
  const bool os_saves_ymm = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
  const bool os_saves_zmm = (xcr0 & 0xE6) == 0xE6;  // + opmask, zmm0-15 upper, zmm16-31
  const CpuidRegs leaf7 = cpuid(7, 0);
  const CpuidRegs leaf7_1 = cpuid(7, 1);

  const bool avx2 = os_saves_ymm && bit(leaf1.ecx, 28) /*avx*/ && bit(leaf1.ecx, 12) /*fma*/ &&
                    bit(leaf1.ecx, 29) /*f16c*/ && bit(leaf7.ebx, 5) /*avx2*/;
  if (!avx2) return Isa::kGeneric;
  const bool avx512 = os_saves_zmm && bit(leaf7.ebx, 16) /*f*/ && bit(leaf7.ebx, 17) /*dq*/ &&
                      bit(leaf7.ebx, 30) /*bw*/ && bit(leaf7.ebx, 31) /*vl*/;
  if (!avx512) return Isa::kAvx2;
  const bool avx512bf16 = bit(leaf7_1.eax, 5);
  if (!avx512bf16) return Isa::kAvx512;
  return detect_amx() && tile_state_granted() ? Isa::kAmx : Isa::kAvx512Bf16;
}

Isa best_isa() {
  static const Isa best = detect_best_isa();
  return best;
}

bool detect_amd() {
  // Leaf 0 spells the vendor in ebx, edx, ecx: "Auth" "enti" "cAMD".
  const CpuidRegs leaf0 = cpuid(0, 0);
  return leaf0.ebx == 0x68747541u && leaf0.edx == 0x69746e65u && leaf0.ecx == 0x444d4163u;
}

bool detect_avx512_vnni() { return isa_available(Isa::kAvx512) && bit(cpuid(7, 0).ecx, 11); }

Isa initial_isa() {
  const char* requested = std::getenv("DSPARK_ISA");
  if (requested == nullptr || *requested == '\0') return best_isa();
  const Isa isa = parse_isa(requested);
  if (!isa_available(isa)) {
    throw Error(std::string("DSPARK_ISA=") + requested +
                ": this CPU does not support it (best: " + isa_name(best_isa()) + ")");
  }
  return isa;
}

std::atomic<Isa>& selected_isa() {
  static std::atomic<Isa> selected{initial_isa()};
  return selected;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512bf16";
    case Isa::kAmx: return "amx";
  }
  return "unknown";
}

Isa parse_isa(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (name == isa_name(isa)) return isa;
  }
  throw Error("unknown ISA '" + std::string(name) +
              "' (expected generic, avx2, avx512, avx512bf16 or amx)");
}

std::vector<Isa> available_isas() {
  std::vector<Isa> isas;
  for (Isa isa : kAllIsas) {
    if (isa <= best_isa()) isas.push_back(isa);
  }
  return isas;
}

bool isa_available(Isa isa) { return isa <= best_isa(); }

bool cpu_has_avx512_vnni() {
  static const bool vnni = detect_avx512_vnni();
  return vnni;
}

bool cpu_has_amx() {
  static const bool amx = detect_amx();
  return amx;
}

bool cpu_is_amd() {
  static const bool amd = detect_amd();
  return amd;
}

Isa current_isa() { return selected_isa().load(std::memory_order_relaxed); }

const char* isa_name() { return isa_name(current_isa()); }

void set_isa(Isa isa) {
  if (!isa_available(isa)) {
    throw Error(std::string("ISA ") + isa_name(isa) +
                " is not supported by this CPU (best: " + isa_name(best_isa()) + ")");
  }
  selected_isa().store(isa, std::memory_order_relaxed);
}

}  // namespace dspark::kernels
