// This process's resident memory, as the kernel counts it (/proc/self/status on Linux): what
// `top`'s RES shows, mapped file pages included.
#pragma once
#include <cstdint>

namespace dspark {

int64_t resident_bytes();       // VmRSS now; 0 where the system does not say
int64_t peak_resident_bytes();  // VmHWM: the most resident since the process started; 0 likewise

// Hands the heap's free pages back to the system (glibc's malloc_trim). After a load whose
// conversion buffers were freed, the allocator would otherwise keep them resident.
void release_free_heap();

}  // namespace dspark
