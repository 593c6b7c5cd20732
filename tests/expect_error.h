// Asserts that a call throws dspark::Error with a one-line message containing every needle.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/error.h"

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

}  // namespace dspark::test
