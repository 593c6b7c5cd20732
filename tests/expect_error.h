// Asserts that a call throws dspark::Error, or that a dspark command fails, with a one-line message
// containing every needle.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "test_util.h"

namespace dspark::test {

inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected dspark::Error, got std::exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected dspark::Error, nothing thrown";
}

// A command that failed the way the CLI fails on bad input: exit status 1 and one line on stderr.
inline void expect_one_line_error(const CommandResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 1) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not in: " << r.err;
}

}  // namespace dspark::test
