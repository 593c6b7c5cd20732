// Helpers shared by the kernel tests: restoring the dispatch choice, random data, bf16 rounding.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "model/kernels/cpu_isa.h"
#include "model/kernels/linear_small.h"

namespace dspark::kernels::testing {

// Restores the ISA and bf16 math mode on scope exit, so one test's choice cannot leak into others.
class DispatchGuard {
 public:
  DispatchGuard() : isa_(current_isa()), math_(bf16_math()) {}
  ~DispatchGuard() {
    set_isa(isa_);
    set_bf16_math(math_);
  }
  DispatchGuard(const DispatchGuard&) = delete;
  DispatchGuard& operator=(const DispatchGuard&) = delete;

 private:
  Isa isa_;
  Bf16Math math_;
};

inline std::vector<float> random_floats(size_t count, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

}  // namespace dspark::kernels::testing
