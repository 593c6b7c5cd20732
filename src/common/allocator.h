// Process-wide allocator settings.
#pragma once

namespace dspark {

// Keeps freed memory in the process instead of returning it to the OS. libtorch frees and
// reallocates tensors of tens to hundreds of MB every step; by default glibc serves those with
// fresh mmaps, so every step pays page faults and page zeroing (measured: 60% of a training step
// on 2 cores). Call once at start-up.
void keep_freed_memory();

}  // namespace dspark
