#include "common/allocator.h"

#include <malloc.h>

namespace dspark {

void keep_freed_memory() {
  mallopt(M_MMAP_MAX, 0);                // large blocks come from the heap, where they are reused
  mallopt(M_TRIM_THRESHOLD, 1 << 30);    // keep up to 1 GiB of free heap top
  mallopt(M_TOP_PAD, 64 << 20);          // grow the heap in 64 MiB steps
}

}  // namespace dspark
