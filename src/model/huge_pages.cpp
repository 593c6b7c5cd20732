#include "model/huge_pages.h"

#include <sys/mman.h>

#include <c10/util/accumulate.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/error.h"

namespace dspark::model {
namespace {

constexpr size_t kPageBytes = 4096;

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// `bytes` (rounded up to whole pages) of fresh zero pages starting on a 2 MiB boundary: map 2 MiB
// more than needed and hand back the unaligned head and the tail.
void* map_aligned(size_t bytes) {
  const size_t huge = static_cast<size_t>(kHugePageBytes);
  void* raw = mmap(nullptr, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    throw Error("cannot map " + std::to_string(bytes >> 20) + " MiB for a tensor: " + std::strerror(errno));
  }
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(begin, huge);
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t tail = aligned + bytes, end = begin + bytes + huge;
  if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
  // Advice, not a requirement: without huge pages (THP off, none free) the pages are 4 KiB ones.
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

torch::Tensor empty_in_huge_pages(const std::vector<int64_t>& shape, torch::ScalarType dtype) {
  const auto options = torch::TensorOptions().dtype(dtype);
  const int64_t bytes = c10::multiply_integers(shape) * static_cast<int64_t>(torch::elementSize(dtype));
  if (bytes < kHugePageBytes) return torch::empty(shape, options);
  const size_t length = round_up(static_cast<size_t>(bytes), kPageBytes);
  void* data = map_aligned(length);
  return torch::from_blob(data, shape, [length](void* p) { munmap(p, length); }, options);
}

}  // namespace dspark::model
