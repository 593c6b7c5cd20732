// resident_bytes follows what the process touches: 64 MiB written raise it by at least 60 MiB,
// and the peak is never below the current value. release_free_heap hands freed heap pages back:
// 64 MiB freed in 64 KiB pieces (below glibc's mmap threshold, so they live in the heap, kept
// there by a small allocation above them) leave the process at least 48 MiB smaller once trimmed.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "common/process_memory.h"

namespace dspark {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(ProcessMemory, ResidentBytesCountWhatIsTouched) {
  const int64_t before = resident_bytes();
  ASSERT_GT(before, 0) << "no /proc/self/status";
  std::vector<char> block(64 * kMiB);
  std::memset(block.data(), 1, block.size());
  const int64_t after = resident_bytes();
  EXPECT_GE(after - before, 60 * kMiB);
  EXPECT_GE(peak_resident_bytes(), after);
  EXPECT_EQ(block[12345], 1);
}

TEST(ProcessMemory, ReleaseFreeHeapReturnsFreedPages) {
  std::vector<std::unique_ptr<char[]>> pieces;
  constexpr int64_t kPiece = 64 * 1024;
  for (int i = 0; i < 1024; ++i) {
    pieces.emplace_back(new char[kPiece]);
    std::memset(pieces.back().get(), 1, kPiece);
  }
  auto keeper = std::make_unique<char[]>(64);  // holds the heap's top in place
  const int64_t full = resident_bytes();
  pieces.clear();
  release_free_heap();
  EXPECT_GE(full - resident_bytes(), 48 * kMiB);
  keeper[0] = 1;
}

}  // namespace
}  // namespace dspark
