// File loaders report "<file>: <problem>" on exactly one line, whatever the names in it contain.
#pragma once
#include <string>

#include "common/error.h"

namespace dspark {

[[noreturn]] inline void fail_one_line(const std::string& source, const std::string& problem) {
  std::string message = source + ": " + problem;
  for (char& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  throw Error(message);
}

}  // namespace dspark
