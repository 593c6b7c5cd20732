#include "common/process_memory.h"

#include <malloc.h>

#include <fstream>
#include <string>

namespace dspark {
namespace {

// A "Name:   123 kB" line of /proc/self/status, in bytes.
int64_t status_kb_field(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.compare(0, name.size(), name) == 0 && line.size() > name.size() && line[name.size()] == ':')
      return std::stoll(line.substr(name.size() + 1)) * 1024;
  return 0;
}

}  // namespace

int64_t resident_bytes() { return status_kb_field("VmRSS"); }
int64_t peak_resident_bytes() { return status_kb_field("VmHWM"); }

void release_free_heap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace dspark
