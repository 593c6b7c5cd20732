// Which SIMD instruction set the kernels run with. Detected once from cpuid (checking that the OS
// saves the vector state too), overridable with DSPARK_ISA=generic|avx2|avx512|avx512bf16|amx and by
// set_isa() (tests and benchmarks force each variant in turn). This choice is the only mutable
// global state of the kernels.
#pragma once
#include <string_view>
#include <vector>

namespace dspark::kernels {

// Ordered from least to most capable; each level implies the ones below it.
enum class Isa {
  kGeneric,     // portable C++, compiled without -march
  kAvx2,        // AVX2 + FMA + F16C
  kAvx512,      // AVX-512 F/BW/VL/DQ
  kAvx512Bf16,  // AVX-512 plus AVX512_BF16 (vdpbf16ps, vcvtneps2bf16)
  kAmx,         // AVX512_BF16 plus AMX tiles with int8 and bf16 (Sapphire Rapids and later), only
                // once Linux granted the process the tile state (arch_prctl, asked at detection):
                // without it the first tile instruction raises SIGILL
};

const char* isa_name(Isa isa);
// Throws dspark::Error for an unknown name.
Isa parse_isa(std::string_view name);

// The levels this CPU and OS support, ascending.
std::vector<Isa> available_isas();
bool isa_available(Isa isa);

// The level the kernels currently use.
Isa current_isa();
const char* isa_name();
// Forces a level; throws dspark::Error when this CPU does not support it.
void set_isa(Isa isa);

// AVX512-VNNI (vpdpbusd, the quantized kernels' integer dot product), beside the levels: CPUs
// have it with and without AVX512_BF16. Meaningful where the AVX-512 level is available.
bool cpu_has_avx512_vnni();

// AMX tiles with int8 and bf16 in the CPU and in the OS's saved state (cpuid, XCR0), whether or not
// the process holds the permission that Isa::kAmx also needs.
bool cpu_has_amx();

// Whether the CPU is AMD's (cpuid's vendor string AuthenticAMD). Only memory-stream tuning reads
// it: a software prefetch that a Xeon's decode stream needs slows a Zen core's down.
bool cpu_is_amd();

}  // namespace dspark::kernels
