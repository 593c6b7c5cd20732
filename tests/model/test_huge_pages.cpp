#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "model/huge_pages.h"

namespace dspark::model {
namespace {

// The /proc/self/smaps entry of the mapping that contains `address`: its header line and fields
// (VmFlags included); empty when no mapping contains it.
std::string smaps_entry(const void* address) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line, entry;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    // Header lines start "begin-end perms ..." in hex; field lines start with a name and a colon.
    if (header >> std::hex >> begin >> dash >> end && dash == '-') {
      if (inside) return entry;
      inside = begin <= a && a < end;
      entry.clear();
    }
    if (inside) entry += line + "\n";
  }
  return inside ? entry : "";
}

bool advised_for_huge_pages(const std::string& entry) {
  const size_t flags = entry.find("VmFlags:");
  if (flags == std::string::npos) return false;
  const std::string line = entry.substr(flags, entry.find('\n', flags) - flags);
  return line.find(" hg") != std::string::npos;
}

TEST(HugePages, LargeTensorSitsOnA2MiBBoundaryInAnAdvisedMapping) {
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "kernel without transparent huge pages: madvise cannot mark the mapping";
  }
  const torch::Tensor t = empty_in_huge_pages({1536, 1024}, torch::kBFloat16);  // 3 MiB
  EXPECT_EQ(t.sizes(), (torch::IntArrayRef{1536, 1024}));
  EXPECT_EQ(t.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kHugePageBytes, 0u);
  const std::string entry = smaps_entry(t.data_ptr());
  ASSERT_FALSE(entry.empty());
  EXPECT_TRUE(advised_for_huge_pages(entry)) << entry;
}

TEST(HugePages, EveryElementIsWritableUpToTheLastPage) {
  // 2 MiB + 4 bytes: the mapping ends one 4 KiB page into the second huge page.
  torch::Tensor t = empty_in_huge_pages({(kHugePageBytes / 4) + 1}, torch::kFloat32);
  t.fill_(1.5f);
  EXPECT_EQ(t.sum().item<double>(), 1.5 * t.numel());
  EXPECT_EQ(t[-1].item<float>(), 1.5f);
}

TEST(HugePages, SmallTensorComesFromTheUsualAllocator) {
  const torch::Tensor t = empty_in_huge_pages({16, 16}, torch::kFloat32);
  EXPECT_EQ(t.numel(), 256);
  EXPECT_FALSE(advised_for_huge_pages(smaps_entry(t.data_ptr())));
}

TEST(HugePages, MappingIsReturnedWhenTheLastTensorGoes) {
  void* data = nullptr;
  {
    torch::Tensor t = empty_in_huge_pages({4 << 20}, torch::kFloat32);  // 16 MiB
    torch::Tensor view = t.narrow(0, 8, 16);
    data = t.data_ptr();
    t = torch::Tensor();
    EXPECT_FALSE(smaps_entry(data).empty()) << "a view keeps the memory alive";
    view.fill_(2.0f);
  }
  EXPECT_TRUE(smaps_entry(data).empty() || !advised_for_huge_pages(smaps_entry(data)));
}

}  // namespace
}  // namespace dspark::model
