// The ISA choice: names, forcing a level, and AMX's tile-state permission (Isa::kAmx exists only
// where Linux granted it; without it the first tile instruction raises SIGILL).
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "model/kernels/cpu_isa.h"
#include "model/kernels/kernel_test_util.h"

namespace dspark::kernels {
namespace {

using testing::DispatchGuard;

constexpr Isa kLevels[] = {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx};

TEST(CpuIsa, NamesRoundTripAndGenericIsAlwaysAvailable) {
  for (Isa isa : kLevels) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_THROW(parse_isa("sse9"), std::exception);
  const std::vector<Isa> isas = available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kGeneric);
  EXPECT_TRUE(isa_available(current_isa()));
}

TEST(CpuIsa, SetIsaRejectsUnsupportedLevels) {
  DispatchGuard guard;
  for (Isa isa : kLevels) {
    if (isa_available(isa)) {
      set_isa(isa);
      EXPECT_EQ(current_isa(), isa);
      EXPECT_STREQ(isa_name(), isa_name(isa));
    } else {
      EXPECT_THROW(set_isa(isa), std::exception);
    }
  }
}

// The vendor as Linux reports it (the kernel reads the same cpuid leaf): the check guards the
// byte order of the three registers' vendor string.
TEST(CpuIsa, AmdIsDetectedWhereTheKernelNamesTheVendorAmd) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  while (vendor.empty() && std::getline(cpuinfo, line)) {
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  }
  if (vendor.empty()) GTEST_SKIP() << "/proc/cpuinfo names no vendor here";
  EXPECT_EQ(cpu_is_amd(), vendor == "AuthenticAMD") << "vendor_id: " << vendor;
}

// Whether this process may use the tile data state (XFEATURE_XTILEDATA, bit 18).
bool holds_tile_state() {
  uint64_t permitted = 0;
  return syscall(SYS_arch_prctl, 0x1022 /*ARCH_GET_XCOMP_PERM*/, &permitted) == 0 && ((permitted >> 18) & 1u);
}

// One tile instruction: configure tile 0 as 1 row of 64 bytes, zero it, release the tiles.
void run_a_tile_instruction() {
  alignas(64) uint8_t config[64] = {};
  config[0] = 1;   // palette 1
  config[16] = 64;  // tile 0: 64 bytes per row
  config[48] = 1;   // tile 0: 1 row
  __asm__ volatile("ldtilecfg %0\n\ttilezero %%tmm0\n\ttilerelease" ::"m"(config));
}

TEST(CpuIsa, AmxIsOfferedExactlyWhereTheTileStateIsGranted) {
  if (!cpu_has_amx()) {
    EXPECT_FALSE(isa_available(Isa::kAmx));
    GTEST_SKIP() << "this CPU has no AMX: the AVX-512 / AVX2 variants run (tested by every kernel test)";
  }
  (void)current_isa();  // detection asks for the permission
  EXPECT_EQ(isa_available(Isa::kAmx), holds_tile_state());
  if (isa_available(Isa::kAmx)) run_a_tile_instruction();  // would raise SIGILL without the permission
}

// What llama.cpp's AMX build does here: a fresh process that never asked for the tile state dies at
// its first tile instruction. The "threadsafe" style runs the statement in a newly executed copy of
// this binary, which has not run detection (a forked child would inherit the parent's permission).
TEST(CpuIsaDeathTest, ATileInstructionWithoutThePermissionRaisesSigill) {
  if (!cpu_has_amx()) GTEST_SKIP() << "this CPU has no AMX";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (holds_tile_state()) std::_Exit(2);  // the premise failed: report it as a wrong exit
        run_a_tile_instruction();
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGILL), "");
}

}  // namespace
}  // namespace dspark::kernels
