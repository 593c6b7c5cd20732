// printf into a std::string: the benchmarks' tables are fixed-format numbers.
#pragma once
#include <cstdio>
#include <string>

namespace dspark::bench {

template <class... Args>
std::string printf_string(const char* fmt, Args... args) {
  std::string out(static_cast<size_t>(std::snprintf(nullptr, 0, fmt, args...)), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, args...);
  return out;
}

}  // namespace dspark::bench
