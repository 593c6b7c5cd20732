// File loaders report "<file>: <problem>" on exactly one line, whatever the names in it contain.
#pragma once
#include <exception>
#include <string>

#include "common/error.h"

namespace dspark {

[[noreturn]] inline void fail_one_line(const std::string& source, const std::string& problem) {
  std::string message = source + ": " + problem;
  for (char& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  throw Error(message);
}

// nlohmann's what() minus the "[json.exception.parse_error.101] " prefix, bounded in length
// ("last read" may quote a huge token).
inline std::string json_error_reason(const std::exception& e) {
  std::string what = e.what();
  if (!what.empty() && what[0] == '[') {
    const size_t close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
  }
  if (what.size() > 300) what = what.substr(0, 300) + "...";
  return what;
}

}  // namespace dspark
