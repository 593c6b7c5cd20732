// Helpers shared by the kernel tests: restoring the dispatch choice, random data, bf16 rounding.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "model/kernels/cpu_isa.h"
#include "model/kernels/linear_small.h"

namespace dspark::kernels::testing {

// Restores the ISA on scope exit, so one test's choice cannot leak into others.
class DispatchGuard {
 public:
  DispatchGuard() : isa_(current_isa()) {}
  ~DispatchGuard() { set_isa(isa_); }
  DispatchGuard(const DispatchGuard&) = delete;
  DispatchGuard& operator=(const DispatchGuard&) = delete;

 private:
  Isa isa_;
};

inline std::vector<float> random_floats(size_t count, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

}  // namespace dspark::kernels::testing
