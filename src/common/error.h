// Error tiers (see docs/design.md):
//  - DSPARK_ASSERT: internal invariants, always on, cheap checks only.
//  - dspark::Error: bad configuration, bad files, bad requests. Thrown at load or admission; the
//    message is one line naming the offending file / value. The CLI prints it and exits non-zero.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace dspark {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "dspark: internal error: assertion `%s` failed at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace dspark

#define DSPARK_ASSERT(cond) \
  ((cond) ? (void)0 : ::dspark::assert_fail(#cond, __FILE__, __LINE__))
